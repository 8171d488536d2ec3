"""Exercise algorithm/online_softmax — one step of the online softmax.

Each query row keeps a running max m, a running sum l and an UNNORMALIZED output O over the keys
seen so far (docs/algorithm.md, section 3):

    m = max_j s_j        l = sum_j exp(s_j - m)        O = sum_j exp(s_j - m) v_j

A new key block brings scores S (rows x Bc) and values V (Bc x d). Fold it in:

    m_new = max(m_old, rowmax(S))
    alpha = exp(m_old - m_new)                 the rescale: the old sums were measured against m_old
    l_new = alpha * l_old + rowsum(exp(S - m_new))
    O_new = alpha * O_old + exp(S - m_new) @ V

Masked scores are -inf. A row may have seen NO finite score yet (m_new = -inf): then
exp(S - m_new) = exp(-inf - (-inf)) = NaN. Use m_ref = 0 where m_new = -inf, and compute both alpha
and exp(S - m_ref) against m_ref; such a row keeps m = -inf, l = 0, O = 0.
The initial state is m = -inf, l = 0, O = 0.
"""

import numpy as np


def online_update(m, l, O, S, V):
    """m, l: (rows,); O: (rows, d); S: (rows, Bc) possibly with -inf; V: (Bc, d), all float64.

    Returns (m_new, l_new, O_new), new arrays of the same shapes (do not rely on in-place edits)."""
    raise NotImplementedError
