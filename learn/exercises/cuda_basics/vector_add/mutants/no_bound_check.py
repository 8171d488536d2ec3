"""Mutant: no bound check: the tail threads of the last block read past the end."""


def add(ctx, a, b, c, n):
    i = ctx.blockIdx.x * ctx.blockDim.x + ctx.threadIdx.x
    ai = yield ctx.load(a, i)
    bi = yield ctx.load(b, i)
    yield ctx.store(c, i, ai + bi)
