"""Mutant: records O / l instead of the unnormalized O."""

import numpy as np


def trace(q, k, v, scale, block):
    nq, d = len(q), v.shape[1]
    m, l, O = np.full(nq, -np.inf), np.zeros(nq), np.zeros((nq, d))
    states = []
    for j0 in range(0, len(k), block):
        S = scale * q @ k[j0:j0 + block].T
        m_new = np.maximum(m, S.max(axis=1))
        alpha = np.exp(m - m_new)
        p = np.exp(S - m_new[:, None])
        l = alpha * l + p.sum(axis=1)
        O = alpha[:, None] * O + p @ v[j0:j0 + block]
        m = m_new
        states.append((m.copy(), l.copy(), O / l[:, None]))
    return states
