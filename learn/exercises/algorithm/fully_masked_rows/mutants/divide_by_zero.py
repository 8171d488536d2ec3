"""Mutant: out = O / l without the l == 0 test: an empty row becomes 0/0 = NaN."""

import numpy as np


def finalize(m, l, O):
    empty = l == 0
    safe_l = np.where(empty, 1.0, l)
    out = O / l[:, None]
    lse = np.where(empty, -np.inf, m + np.log(safe_l))
    return out, lse
