"""Spec of cuda_basics/warp_reduce: every lane holds its warp's sum."""

import numpy as np
from grading import close, randn

from cuda_basics.common import launch

CONCEPT = "warp reduction with shfl_xor: a 5-step butterfly, every lane gets the total"
NEEDS_GPU = False


def check(mod, rng):
    for n, B in ((1, 32), (31, 32), (33, 64), (1000, 96), (int(rng.integers(40, 200)), 32)):
        name = f"n {n}, block {B}"
        x = randn(rng, n)
        out = np.full(n, np.nan)
        launch(name, mod.warp_sum, -(-n // B), B, x, out, n)
        w = -(-n // 32)
        exp = np.repeat(np.pad(x, (0, w * 32 - n)).reshape(w, 32).sum(axis=1), 32)[:n]
        close(name, out, exp, rtol=1e-12, atol=1e-12, what="out")
