"""Mutant: masks 1, 2, 4, 8, 8 (a typo: 16 never exchanged)."""


def warp_sum(ctx, x, out, n):
    i = ctx.blockIdx.x * ctx.blockDim.x + ctx.threadIdx.x
    v = (yield ctx.load(x, i)) if i < n else 0.0
    for m in (1, 2, 4, 8, 8):
        v += yield ctx.shfl_xor(v, m)
    if i < n:
        yield ctx.store(out, i, v)
