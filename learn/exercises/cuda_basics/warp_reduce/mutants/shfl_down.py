"""Mutant: shfl_down instead of shfl_xor: only lane 0 gets the total."""


def warp_sum(ctx, x, out, n):
    i = ctx.blockIdx.x * ctx.blockDim.x + ctx.threadIdx.x
    v = (yield ctx.load(x, i)) if i < n else 0.0
    for m in (16, 8, 4, 2, 1):
        v += yield ctx.shfl_down(v, m)
    if i < n:
        yield ctx.store(out, i, v)
