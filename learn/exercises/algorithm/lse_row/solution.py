"""Solution for algorithm/lse_row (the task is in stub.py)."""

import numpy as np


def lse_row(s):
    s = np.asarray(s, dtype=np.float64)
    m = s.max()
    if m == -np.inf:
        return -np.inf
    return m + np.log(np.exp(s - m).sum())
