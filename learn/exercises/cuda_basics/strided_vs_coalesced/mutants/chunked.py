"""Mutant: the chunked version of the docstring: right values, strided (uncoalesced) accesses."""


def scale(ctx, x, y, n):
    t = ctx.blockIdx.x * ctx.blockDim.x + ctx.threadIdx.x
    k = -(-n // (ctx.blockDim.x * ctx.gridDim.x))
    for j in range(k):
        i = t * k + j
        if i < n:
            v = yield ctx.load(x, i)
            yield ctx.store(y, i, 2 * v)
