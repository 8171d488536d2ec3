"""Spec of cuda_basics/softmax_row: softmax rows against float64, short and long rows, large x."""

import numpy as np
from grading import close, randn

from cuda_basics.common import launch

CONCEPT = "online softmax of a row by one warp: per-lane (m, l), a shfl_xor merge, then normalize"
NEEDS_GPU = False


def check(mod, rng):
    for rows, L in ((1, 1), (5, 31), (3, 33), (6, 100), (int(rng.integers(2, 9)), int(rng.integers(2, 70)))):
        name = f"rows {rows}, L {L}"
        offset = rng.uniform(-120, 120, (rows, 1))
        offset[0], offset[-1] = 110.0, -110.0 if rows > 1 else 110.0  # exp overflows / underflows
        x = (randn(rng, rows, L, scale=3.0) + offset).astype(np.float32)
        out = np.full_like(x, np.nan)
        launch(name, mod.softmax_rows, -(-rows // 4), (32, 4), x, out, rows, L)
        e = np.exp(x - x.max(axis=1, keepdims=True).astype(np.float64))
        close(name, out, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6, what="out")
