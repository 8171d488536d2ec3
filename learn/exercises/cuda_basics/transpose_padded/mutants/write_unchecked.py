"""Mutant: the write is not bound-checked (out of bounds on partial tiles)."""

import numpy as np


def transpose(ctx, a, out, rows, cols):
    tile = ctx.shared("tile", (32, 33), np.float32)
    tx, ty = ctx.threadIdx.x, ctx.threadIdx.y
    r, c = ctx.blockIdx.y * 32 + ty, ctx.blockIdx.x * 32 + tx
    if r < rows and c < cols:
        v = yield ctx.load(a, (r, c))
        yield ctx.store(tile, (ty, tx), v)
    yield ctx.syncthreads()
    r, c = ctx.blockIdx.x * 32 + ty, ctx.blockIdx.y * 32 + tx   # a row of out = a column of a
    if True:
        v = yield ctx.load(tile, (tx, ty))
        yield ctx.store(out, (r, c), v)
