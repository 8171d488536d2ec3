"""Mutant: only the column is bound-checked; threads below the last row write out of bounds."""


def fill(ctx, out, H, W):
    col = ctx.blockIdx.x * ctx.blockDim.x + ctx.threadIdx.x
    row = ctx.blockIdx.y * ctx.blockDim.y + ctx.threadIdx.y
    if col < W:
        yield ctx.store(out, (row, col), 1000 * row + col)
