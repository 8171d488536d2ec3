"""Mutant: i = blockIdx.x * gridDim.x + threadIdx.x (the grid size instead of the block size)."""


def iota(ctx, out, n):
    i = ctx.blockIdx.x * ctx.gridDim.x + ctx.threadIdx.x
    if i < n:
        yield ctx.store(out, i, i)
