"""Spec of cuda_basics/histogram: exact counts, several blocks, bins above and below the block size."""

import numpy as np
from grading import equal

from cuda_basics.common import launch

CONCEPT = "atomics: a shared-memory histogram per block (zero, barrier, atomicAdd), merged with global atomics"
NEEDS_GPU = False


def check(mod, rng):
    for n, bins, B in ((1, 4, 32), (31, 16, 32), (33, 5, 32), (1000, 37, 128), (int(rng.integers(100, 300)), 100, 64)):
        name = f"n {n}, bins {bins}, block {B}"
        v = rng.integers(0, bins, n).astype(np.int32)
        v[: n // 3] = v[0]  # a hot bin: many threads of one warp hit the same count
        hist = np.zeros(bins, np.int64)
        launch(name, mod.histogram, -(-n // B), B, v, hist, n, bins)
        equal(name, hist, np.bincount(v, minlength=bins), what="hist")
