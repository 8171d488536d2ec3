"""Mutant: no `if i < n`: the threads past the end of the last block write out of bounds."""


def iota(ctx, out, n):
    i = ctx.blockIdx.x * ctx.blockDim.x + ctx.threadIdx.x
    yield ctx.store(out, i, i)
