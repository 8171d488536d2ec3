"""Solution for algorithm/bwd_recompute_P (the task is in stub.py)."""

import numpy as np


def recompute_p(q, k, lse, scale, causal):
    nq, nk = len(q), len(k)
    s = scale * q @ k.T
    if causal:
        keep = np.arange(nk)[None, :] <= np.arange(nq)[:, None] + (nk - nq)
        s = np.where(keep, s, -np.inf)
    empty = lse == -np.inf
    p = np.exp(s - np.where(empty, 0.0, lse)[:, None])
    return np.where(empty[:, None], 0.0, p)
