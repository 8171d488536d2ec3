"""Mutant: transpose straight from global memory: coalesced reads, but the writes go down columns."""


def transpose(ctx, a, out, rows, cols):
    r = ctx.blockIdx.y * 32 + ctx.threadIdx.y
    c = ctx.blockIdx.x * 32 + ctx.threadIdx.x
    if r < rows and c < cols:
        v = yield ctx.load(a, (r, c))
        yield ctx.store(out, (c, r), v)
