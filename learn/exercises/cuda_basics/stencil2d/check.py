"""Spec of cuda_basics/stencil2d: values with zero boundary, and the global reads of a bounded."""

import numpy as np
from grading import Fail, close, randn

from cuda_basics.common import launch, sectors, threads

CONCEPT = "2-D stencil: a shared tile with a one-element halo, loaded once, __syncthreads(), then computed"
NEEDS_GPU = False


def check(mod, rng):
    for H, W in ((1, 1), (20, 37), (16, 16), (33, 5), (int(rng.integers(17, 40)), int(rng.integers(17, 40)))):
        name = f"H {H}, W {W}"
        a = randn(rng, H, W).astype(np.float32)
        out = np.full_like(a, np.nan)
        grid = (-(-W // 16), -(-H // 16))
        st = launch(name, mod.stencil, grid, (16, 16), a, out, H, W)
        p = np.pad(a.astype(np.float64), 1)
        exp = 4 * p[1:-1, 1:-1] - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]
        close(name, out, exp, rtol=1e-5, atol=1e-5, what="out")
        t = threads(grid, (16, 16))
        r, c = t["by"] * 16 + t["ty"], t["bx"] * 16 + t["tx"]
        ok = (r < H) & (c < W)
        once = sectors(t["warp"][ok], (r * W + c)[ok], 4)
        if st.sectors("load", "a") > 3 * once:
            raise Fail(name, f"{st.sectors('load', 'a')} sectors read from a, more than 3x the {once} of "
                             "reading each element once: read the neighbours from the shared tile")
