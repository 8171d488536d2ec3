"""Mutant: the butterfly stops at mask 2: each lane holds the sum of 16 lanes."""


def warp_sum(ctx, x, out, n):
    i = ctx.blockIdx.x * ctx.blockDim.x + ctx.threadIdx.x
    v = (yield ctx.load(x, i)) if i < n else 0.0
    for m in (16, 8, 4, 2):
        v += yield ctx.shfl_xor(v, m)
    if i < n:
        yield ctx.store(out, i, v)
