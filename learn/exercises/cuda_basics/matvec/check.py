"""Spec of cuda_basics/matvec: y = A x, and A read with 32 consecutive floats per warp step."""

import numpy as np
from grading import close, randn

from cuda_basics.common import at_most, launch, sectors

CONCEPT = "matrix-vector product: one warp per row, lanes stride the columns (coalesced), shuffle sum"
NEEDS_GPU = False


def check(mod, rng):
    for M, N in ((1, 1), (5, 33), (9, 100), (3, 64), (int(rng.integers(2, 12)), int(rng.integers(35, 130)))):
        name = f"M {M}, N {N}"
        A, x = randn(rng, M, N).astype(np.float32), randn(rng, N).astype(np.float32)
        y = np.full(M, np.nan, np.float32)
        st = launch(name, mod.matvec, -(-M // 4), (32, 4), A, x, y, M, N)
        close(name, y, A.astype(np.float64) @ x, rtol=1e-5, atol=1e-5, what="y")
        r, c = np.divmod(np.arange(M * N), N)
        at_most(name, st.sectors("load", "A"), sectors(r * 10**6 + c // 32, r * N + c, 4), "reads of A")
