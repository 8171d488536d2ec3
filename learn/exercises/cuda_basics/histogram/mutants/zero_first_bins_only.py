"""Mutant: h zeroed only for b < blockDim.x (no loop): garbage counts when bins > threads."""

import numpy as np


def histogram(ctx, v, hist, n, bins):
    h = ctx.shared("h", (bins,), np.int64)
    t, B = ctx.threadIdx.x, ctx.blockDim.x
    if t < bins:
        yield ctx.store(h, t, 0)
    yield ctx.syncthreads()
    i = ctx.blockIdx.x * B + t
    if i < n:
        b = yield ctx.load(v, i)
        yield ctx.atomic_add(h, b, 1)
    yield ctx.syncthreads()
    for b in range(t, bins, B):
        c = yield ctx.load(h, b)
        yield ctx.atomic_add(hist, b, c)
