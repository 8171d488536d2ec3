"""Mutant: row from x and column from y (the matrix convention swapped)."""


def fill(ctx, out, H, W):
    row = ctx.blockIdx.x * ctx.blockDim.x + ctx.threadIdx.x
    col = ctx.blockIdx.y * ctx.blockDim.y + ctx.threadIdx.y
    if row < H and col < W:
        yield ctx.store(out, (row, col), 1000 * row + col)
