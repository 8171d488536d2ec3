"""Mutant: a row with no visible key gets LSE 0 instead of -inf."""

import numpy as np


def lse_row(s):
    s = np.asarray(s, dtype=np.float64)
    m = s.max()
    if m == -np.inf:
        return 0.0
    return m + np.log(np.exp(s - m).sum())
