"""Mutant: no m_ref guard: a row with no finite score so far gets -inf - (-inf) = NaN."""

import numpy as np


def online_update(m, l, O, S, V):
    m_new = np.maximum(m, S.max(axis=1))
    m_ref = m_new
    alpha = np.exp(m - m_ref)
    p = np.exp(S - m_ref[:, None])
    return m_new, alpha * l + p.sum(axis=1), alpha[:, None] * O + p @ V
