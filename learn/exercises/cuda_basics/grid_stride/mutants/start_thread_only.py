"""Mutant: the loop starts at threadIdx.x (blockIdx forgotten)."""


def axpy(ctx, a, x, y, n):
    i = ctx.threadIdx.x
    while i < n:
        xi = yield ctx.load(x, i)
        yi = yield ctx.load(y, i)
        yield ctx.store(y, i, yi + a * xi)
        i += ctx.blockDim.x * ctx.gridDim.x
