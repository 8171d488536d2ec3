"""Spec of cuda_basics/grid_stride: y += a x with a fixed grid, every element exactly once."""

import numpy as np
from grading import close, randn

from cuda_basics.common import launch

CONCEPT = "grid-stride loop: i += blockDim.x * gridDim.x, each element exactly once"
NEEDS_GPU = False


def check(mod, rng):
    for n, grid, block in ((1, 2, 32), (31, 3, 32), (33, 2, 32), (1000, 3, 64), (200, 8, 32)):
        name = f"n {n}, grid {grid}, block {block}"
        x, y = randn(rng, n), randn(rng, n)
        a = 1.5 + rng.random()
        exp = y + a * x
        launch(name, mod.axpy, grid, block, a, x, y, n)
        close(name, y, exp, rtol=1e-12, atol=1e-12, what="y")
