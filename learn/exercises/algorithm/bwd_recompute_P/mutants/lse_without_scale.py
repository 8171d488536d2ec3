"""Mutant: recomputes S without the softmax scale."""

import numpy as np


def recompute_p(q, k, lse, scale, causal):
    nq, nk = len(q), len(k)
    s = q @ k.T
    if causal:
        keep = np.arange(nk)[None, :] <= np.arange(nq)[:, None] + (nk - nq)
        s = np.where(keep, s, -np.inf)
    empty = lse == -np.inf
    p = np.exp(s - np.where(empty, 0.0, lse)[:, None])
    return np.where(empty[:, None], 0.0, p)
