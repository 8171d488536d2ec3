"""Mutant: the shuffles sit inside `if i < n`: lanes past n skip them (undefined; simulator error)."""


def warp_sum(ctx, x, out, n):
    i = ctx.blockIdx.x * ctx.blockDim.x + ctx.threadIdx.x
    if i < n:
        v = yield ctx.load(x, i)
        for m in (16, 8, 4, 2, 1):
            v += yield ctx.shfl_xor(v, m)
        yield ctx.store(out, i, v)
