"""Mutant: records the state BEFORE each block (the initial state in, the final one out)."""

import numpy as np


def trace(q, k, v, scale, block):
    nq, d = len(q), v.shape[1]
    m, l, O = np.full(nq, -np.inf), np.zeros(nq), np.zeros((nq, d))
    states = []
    for j0 in range(0, len(k), block):
        states.append((m.copy(), l.copy(), O.copy()))
        S = scale * q @ k[j0:j0 + block].T
        m_new = np.maximum(m, S.max(axis=1))
        alpha = np.exp(m - m_new)
        p = np.exp(S - m_new[:, None])
        l = alpha * l + p.sum(axis=1)
        O = alpha[:, None] * O + p @ v[j0:j0 + block]
        m = m_new
    return states
