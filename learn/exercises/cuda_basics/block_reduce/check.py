"""Spec of cuda_basics/block_reduce: per-block sums; races and uninitialized reads are errors."""

import numpy as np
from grading import close, randn

from cuda_basics.common import launch

CONCEPT = "block reduction in shared memory: a tree of adds with __syncthreads() between rounds"
NEEDS_GPU = False


def check(mod, rng):
    for n, B in ((1, 32), (31, 32), (33, 32), (1000, 128), (int(rng.integers(65, 300)), 64)):
        name = f"n {n}, block {B}"
        x = randn(rng, n)
        nb = -(-n // B)
        partial = np.full(nb, np.nan)
        launch(name, mod.block_sum, nb, B, x, partial, n)
        exp = np.pad(x, (0, nb * B - n)).reshape(nb, B).sum(axis=1)
        close(name, partial, exp, rtol=1e-12, atol=1e-12, what="partial")
