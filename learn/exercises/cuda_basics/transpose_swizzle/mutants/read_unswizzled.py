"""Mutant: swizzled on the write, not on the read (wrong values)."""

import numpy as np


def transpose(ctx, a, out, rows, cols):
    tile = ctx.shared("tile", (32, 32), np.float32)
    tx, ty = ctx.threadIdx.x, ctx.threadIdx.y
    r, c = ctx.blockIdx.y * 32 + ty, ctx.blockIdx.x * 32 + tx
    if r < rows and c < cols:
        v = yield ctx.load(a, (r, c))
        yield ctx.store(tile, (ty, tx ^ ty), v)
    yield ctx.syncthreads()
    r, c = ctx.blockIdx.x * 32 + ty, ctx.blockIdx.y * 32 + tx
    if r < cols and c < rows:
        v = yield ctx.load(tile, (tx, ty))
        yield ctx.store(out, (r, c), v)
