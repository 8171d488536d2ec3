"""Spec of algorithm/lse_row."""

import numpy as np
from grading import Fail, close, randn
from reference import lse

CONCEPT = "log-sum-exp of a row with the max subtracted; -inf for an empty row"
NEEDS_GPU = False


def check(mod, rng):
    for n in (1, 3, 17, 64):
        s = randn(rng, n, scale=3.0)
        close(f"random row n={n}", mod.lse_row(s), lse(s), rtol=1e-12, atol=1e-12, what="LSE")
    for n in (5, 33):
        s = randn(rng, n, scale=2.0)
        s[rng.random(n) < 0.4] = -np.inf
        s[rng.integers(n)] = rng.standard_normal() + 0.5
        close(f"row with masked scores n={n}", mod.lse_row(s), lse(s), rtol=1e-12, atol=1e-12, what="LSE")
    s = randn(rng, 9) + 1000.0 * rng.choice([-1.0, 1.0])
    close("huge scores (|s| ~ 1000: exp overflows without the max)", mod.lse_row(s), lse(s),
          rtol=1e-12, atol=1e-12, what="LSE")
    s = np.full(int(rng.integers(1, 9)), -np.inf)
    close("fully masked row (LSE must be -inf)", mod.lse_row(s), -np.inf, what="LSE")
