"""Solution for cuda_basics/strided_vs_coalesced (the task is in stub.py)."""


def scale(ctx, x, y, n):
    T = ctx.blockDim.x * ctx.gridDim.x
    t = ctx.blockIdx.x * ctx.blockDim.x + ctx.threadIdx.x
    for j in range(-(-n // T)):
        i = j * T + t
        if i < n:
            v = yield ctx.load(x, i)
            yield ctx.store(y, i, 2 * v)
