"""Mutant: alpha computed as exp(m_new - m_old) (the wrong direction)."""

import numpy as np


def online_update(m, l, O, S, V):
    m_new = np.maximum(m, S.max(axis=1))
    m_ref = np.where(m_new == -np.inf, 0.0, m_new)
    alpha = np.where(m == -np.inf, 0.0, np.exp(m_ref - m))
    p = np.exp(S - m_ref[:, None])
    return m_new, alpha * l + p.sum(axis=1), alpha[:, None] * O + p @ V
