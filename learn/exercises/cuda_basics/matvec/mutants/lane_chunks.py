"""Mutant: each lane takes a contiguous chunk of columns: right values, uncoalesced reads of A."""


def matvec(ctx, A, x, y, M, N):
    r, lane = ctx.blockIdx.x * ctx.blockDim.y + ctx.threadIdx.y, ctx.threadIdx.x
    if r >= M:
        return
    k = -(-N // 32)
    acc = 0.0
    for c in range(lane * k, min(N, lane * k + k)):
        a = yield ctx.load(A, (r, c))
        xc = yield ctx.load(x, c)
        acc += a * xc
    for m in (16, 8, 4, 2, 1):
        acc += yield ctx.shfl_xor(acc, m)
    if lane == 0:
        yield ctx.store(y, r, acc)
