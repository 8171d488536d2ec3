"""Exercise algorithm/bwd_recompute_P — rebuild P in the backward from the stored LSE.

The forward stores only LSE (Nq floats), not P (Nq x Nk). Since P_ij = exp(S_ij) / sum_j exp(S_ij)
= exp(S_ij − LSE_i), the backward recomputes S = scale · Q Kᵀ (same mask) and P = exp(S − LSE)
(docs/algorithm.md, section 5). Safe: S_ij <= LSE_i, so the exponent is <= 0.
Masked entries (bottom-right causal here: key j visible to query i iff j <= i + Nk − Nq) get P = 0.
A row with LSE = −inf saw no key: its P row is all 0 (exp(S − (−inf)) would be +inf, then NaN).
"""

import numpy as np


def recompute_p(q, k, lse, scale, causal):
    """q (Nq, d), k (Nk, d), lse (Nq,) float64. Returns P: (Nq, Nk)."""
    raise NotImplementedError
