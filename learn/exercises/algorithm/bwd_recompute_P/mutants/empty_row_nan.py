"""Mutant: a row with LSE = −inf is not special-cased: exp(−inf + inf) = NaN."""

import numpy as np


def recompute_p(q, k, lse, scale, causal):
    nq, nk = len(q), len(k)
    s = scale * q @ k.T
    if causal:
        keep = np.arange(nk)[None, :] <= np.arange(nq)[:, None] + (nk - nq)
        s = np.where(keep, s, -np.inf)
    empty = lse == -np.inf
    p = np.exp(s - np.where(empty, 0.0, lse)[:, None])
    return np.exp(s - lse[:, None])
