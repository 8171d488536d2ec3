"""Mutant: row = blockIdx.y * blockDim.x + threadIdx.y (the x block size used for rows)."""


def fill(ctx, out, H, W):
    col = ctx.blockIdx.x * ctx.blockDim.x + ctx.threadIdx.x
    row = ctx.blockIdx.y * ctx.blockDim.x + ctx.threadIdx.y
    if row < H and col < W:
        yield ctx.store(out, (row, col), 1000 * row + col)
