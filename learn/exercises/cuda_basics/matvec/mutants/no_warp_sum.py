"""Mutant: the partials are not summed across the warp: y[row] = lane 0's partial only."""


def matvec(ctx, A, x, y, M, N):
    r, lane = ctx.blockIdx.x * ctx.blockDim.y + ctx.threadIdx.y, ctx.threadIdx.x
    if r >= M:
        return
    acc = 0.0
    for c in range(lane, N, 32):
        a = yield ctx.load(A, (r, c))
        xc = yield ctx.load(x, c)
        acc += a * xc
    if lane == 0:
        yield ctx.store(y, r, acc)
