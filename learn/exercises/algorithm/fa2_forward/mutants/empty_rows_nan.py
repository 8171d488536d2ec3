"""Mutant: the final O / l without the l == 0 test: empty rows become NaN."""

import numpy as np


def fa2_forward(q, k, v, scale, causal, block_q, block_k):
    nq, nk, d = len(q), len(k), v.shape[1]
    shift = nk - nq
    out, lse = np.zeros((nq, d)), np.full(nq, -np.inf)
    for i0 in range(0, nq, block_q):
        rows = np.arange(i0, min(i0 + block_q, nq))
        m, l, O = np.full(len(rows), -np.inf), np.zeros(len(rows)), np.zeros((len(rows), d))
        for j0 in range(0, nk, block_k):
            if causal and j0 > rows[-1] + shift:
                break  # every later key block is right of the diagonal
            cols = np.arange(j0, min(j0 + block_k, nk))
            S = scale * q[rows] @ k[cols].T
            if causal:
                S = np.where(cols[None, :] <= rows[:, None] + shift, S, -np.inf)
            m_new = np.maximum(m, S.max(axis=1))
            m_ref = np.where(m_new == -np.inf, 0.0, m_new)
            alpha = np.exp(m - m_ref)
            p = np.exp(S - m_ref[:, None])
            l = alpha * l + p.sum(axis=1)
            O = alpha[:, None] * O + p @ v[cols]
            m = m_new
        seen = l > 0
        out[rows] = O / l[:, None]
        lse[rows] = np.where(seen, m + np.log(np.where(seen, l, 1.0)), -np.inf)
    return out, lse
