"""Spec of cuda_basics/coalesced_copy: values, and sectors no more than a row-walking copy."""

import numpy as np
from grading import Fail, equal, randn

from cuda_basics.common import at_most, launch, sectors, threads

CONCEPT = "coalescing: threadIdx.x along the contiguous dimension; graded on 32-byte sectors"
NEEDS_GPU = False


def ideal(rows, cols):
    t = threads((-(-cols // 32), -(-rows // 8)), (32, 8))
    r, c = t["by"] * 8 + t["ty"], t["bx"] * 32 + t["tx"]
    ok = (r < rows) & (c < cols)
    return sectors(t["warp"][ok], (r * cols + c)[ok], 4)


def check(mod, rng):
    for rows, cols in ((1, 1), (33, 31), (8, 100), (40, 33), (int(rng.integers(5, 20)), int(rng.integers(30, 70)))):
        name = f"{rows} x {cols}"
        grid, block = mod.config(rows, cols)
        if int(np.prod(block)) > 1024:
            raise Fail(name, f"block {block} has more than 1024 threads")
        src = randn(rng, rows, cols).astype(np.float32)
        dst = np.full_like(src, np.nan)
        st = launch(name, mod.copy, grid, block, src, dst, rows, cols)
        equal(name, dst, src, what="dst")
        best = ideal(rows, cols)
        at_most(name, st.sectors("load", "src"), best, "loads of src")
        at_most(name, st.sectors("store", "dst"), best, "stores of dst")
