"""Mutant: interleaved with stride blockDim.x only: blocks overlap and the tail is never reached."""


def scale(ctx, x, y, n):
    T = ctx.blockDim.x * ctx.gridDim.x
    t = ctx.blockIdx.x * ctx.blockDim.x + ctx.threadIdx.x
    for j in range(-(-n // T)):
        i = j * ctx.blockDim.x + t
        if i < n:
            v = yield ctx.load(x, i)
            yield ctx.store(y, i, 2 * v)
