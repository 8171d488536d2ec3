"""Spec of cuda_basics/index_2d: every cell written once, partial blocks on both edges."""

import numpy as np
from grading import equal

from cuda_basics.common import launch

CONCEPT = "2-D indexing: col from x, row from y, both bounds checked"
NEEDS_GPU = False


def check(mod, rng):
    for H, W, block in ((1, 1, (32, 4)), (5, 40, (32, 8)), (33, 7, (8, 8)), (9, 70, (32, 4)),
                        (int(rng.integers(10, 30)), int(rng.integers(35, 60)), (16, 8))):
        name = f"H {H}, W {W}, block {block}"
        out = np.full((H, W), -7, np.int64)
        grid = (-(-W // block[0]), -(-H // block[1]))
        launch(name, mod.fill, grid, block, out, H, W)
        equal(name, out, 1000 * np.arange(H)[:, None] + np.arange(W)[None, :], what="out")
