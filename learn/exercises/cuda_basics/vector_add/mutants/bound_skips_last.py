"""Mutant: `if i < n - 1`: the last element is never written."""


def add(ctx, a, b, c, n):
    i = ctx.blockIdx.x * ctx.blockDim.x + ctx.threadIdx.x
    if i < n - 1:
        ai = yield ctx.load(a, i)
        bi = yield ctx.load(b, i)
        yield ctx.store(c, i, ai + bi)
