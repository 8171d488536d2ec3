"""Mutant: the column loop stops at the last multiple of 32: the tail of each row is lost."""


def matvec(ctx, A, x, y, M, N):
    r, lane = ctx.blockIdx.x * ctx.blockDim.y + ctx.threadIdx.y, ctx.threadIdx.x
    if r >= M:
        return
    acc = 0.0
    for c in range(lane, N - N % 32 if N >= 32 else N, 32):
        a = yield ctx.load(A, (r, c))
        xc = yield ctx.load(x, c)
        acc += a * xc
    for m in (16, 8, 4, 2, 1):
        acc += yield ctx.shfl_xor(acc, m)
    if lane == 0:
        yield ctx.store(y, r, acc)
