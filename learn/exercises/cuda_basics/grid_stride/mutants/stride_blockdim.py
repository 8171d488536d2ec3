"""Mutant: stride blockDim.x instead of blockDim.x * gridDim.x: blocks redo each other's elements."""


def axpy(ctx, a, x, y, n):
    i = ctx.blockIdx.x * ctx.blockDim.x + ctx.threadIdx.x
    while i < n:
        xi = yield ctx.load(x, i)
        yi = yield ctx.load(y, i)
        yield ctx.store(y, i, yi + a * xi)
        i += ctx.blockDim.x
