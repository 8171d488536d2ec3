"""Mutant: the merge into hist is a plain store: blocks overwrite each other's counts."""

import numpy as np


def histogram(ctx, v, hist, n, bins):
    h = ctx.shared("h", (bins,), np.int64)
    t, B = ctx.threadIdx.x, ctx.blockDim.x
    for b in range(t, bins, B):
        yield ctx.store(h, b, 0)
    yield ctx.syncthreads()
    i = ctx.blockIdx.x * B + t
    if i < n:
        b = yield ctx.load(v, i)
        yield ctx.atomic_add(h, b, 1)
    yield ctx.syncthreads()
    for b in range(t, bins, B):
        c = yield ctx.load(h, b)
        old = yield ctx.load(hist, b)
        yield ctx.store(hist, b, c)
