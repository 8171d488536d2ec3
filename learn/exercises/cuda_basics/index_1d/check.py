"""Spec of cuda_basics/index_1d: out[i] = i on grids with a partial last block."""

import numpy as np
from grading import equal

from cuda_basics.common import launch

CONCEPT = "global thread index blockIdx.x * blockDim.x + threadIdx.x, and the bound check i < n"
NEEDS_GPU = False


def check(mod, rng):
    for n, block in ((1, 32), (31, 32), (33, 32), (1000, 128), (int(rng.integers(100, 300)), 64)):
        name = f"n {n}, block {block}"
        out = np.full(n, -7, np.int64)
        launch(name, mod.iota, -(-n // block), block, out, n)
        equal(name, out, np.arange(n), what="out")
