"""Mutant: LSE in base 2 (log2 l; kernels that use exp2 must convert back to natural log)."""

import numpy as np


def finalize(m, l, O):
    empty = l == 0
    safe_l = np.where(empty, 1.0, l)
    out = np.where(empty[:, None], 0.0, O / safe_l[:, None])
    lse = np.where(empty, -np.inf, m + np.log2(safe_l))
    return out, lse
