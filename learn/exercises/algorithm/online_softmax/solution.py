"""Solution for algorithm/online_softmax (the task is in stub.py)."""

import numpy as np


def online_update(m, l, O, S, V):
    m_new = np.maximum(m, S.max(axis=1))
    m_ref = np.where(m_new == -np.inf, 0.0, m_new)
    alpha = np.exp(m - m_ref)
    p = np.exp(S - m_ref[:, None])
    return m_new, alpha * l + p.sum(axis=1), alpha[:, None] * O + p @ V
