"""Mutant: `if i <= n`: one thread too many."""


def add(ctx, a, b, c, n):
    i = ctx.blockIdx.x * ctx.blockDim.x + ctx.threadIdx.x
    if i <= n:
        ai = yield ctx.load(a, i)
        bi = yield ctx.load(b, i)
        yield ctx.store(c, i, ai + bi)
