"""Spec of cuda_basics/vector_add: values on awkward n, and 4 sectors per full warp access."""

import numpy as np
from grading import close, equal, randn

from cuda_basics.common import launch, sectors, at_most

CONCEPT = "vector add with a bound check; a warp's 32 consecutive floats are 4 sectors"
NEEDS_GPU = False


def check(mod, rng):
    for n, block in ((1, 32), (31, 32), (33, 32), (1000, 256), (int(rng.integers(40, 200)), 64)):
        name = f"n {n}, block {block}"
        a, b = randn(rng, n).astype(np.float32), randn(rng, n).astype(np.float32)
        c = np.full(n, np.nan, np.float32)
        st = launch(name, mod.add, -(-n // block), block, a, b, c, n)
        close(name, c, a.astype(np.float64) + b, rtol=1e-6, atol=1e-6, what="c")
        i = np.arange(n)
        at_most(name, st.sectors("load", "a"), sectors(i // 32, i, 4), "loads of a")
        at_most(name, st.sectors("store", "c"), sectors(i // 32, i, 4), "stores of c")
    st = launch("one full warp", mod.add, 1, 32, *(np.ones(32, np.float32) for _ in range(3)), 32)
    equal("one full warp: sectors of a", st.sectors("load", "a"), 4)
