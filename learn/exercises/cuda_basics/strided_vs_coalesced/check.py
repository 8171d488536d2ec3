"""Spec of cuda_basics/strided_vs_coalesced: values, and the sectors of the interleaved order."""

import numpy as np
from grading import close, randn

from cuda_basics.common import at_most, launch, sectors

CONCEPT = "strided vs coalesced: per-thread chunks (stride k) vs interleaved (stride 1 across a warp)"
NEEDS_GPU = False


def ideal(n, T):
    i = np.arange(n)
    return sectors((i // T) * 10**6 + (i % T) // 32, i, 4)  # instruction = (step, warp)


def check(mod, rng):
    for n, grid, block in ((1, 1, 32), (33, 1, 32), (1000, 1, 64), (500, 2, 32), (int(rng.integers(100, 400)), 3, 32)):
        name = f"n {n}, grid {grid}, block {block}"
        x = randn(rng, n).astype(np.float32)
        y = np.full_like(x, np.nan)
        st = launch(name, mod.scale, grid, block, x, y, n)
        close(name, y, 2.0 * x, rtol=1e-7, atol=0, what="y")
        best = ideal(n, grid * block)
        at_most(name, st.sectors("load", "x"), best, "loads of x")
        at_most(name, st.sectors("store", "y"), best, "stores of y")
