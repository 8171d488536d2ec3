"""Mutant: the max is subtracted without a guard: an all -inf row gives -inf - (-inf) = NaN."""

import numpy as np


def lse_row(s):
    s = np.asarray(s, dtype=np.float64)
    m = s.max()
    return m + np.log(np.exp(s - m).sum())
