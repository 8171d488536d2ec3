"""Exercise algorithm/fa2_backward — the tiled backward pass (capstone of the backward exercises).

Put together bwd_preprocess_D, bwd_recompute_P, bwd_dS and dq_accumulation. The KEY loop is
outside (docs/algorithm.md, section 5; docs/learn/02-flash-attention-2-backward.md):

    D = rowsum(dO ∘ O)                                   preprocessing, once
    for each key block j:                                dK_j, dV_j accumulate "in registers"
        for each query block i:
            S  = scale · Q_i K_jᵀ, masked -> -inf;   P = exp(S − LSE_i)   (rows with LSE = -inf: P = 0)
            dV_j += Pᵀ dO_i
            dP  = dO_i V_jᵀ;   dS = P ∘ (dP − D_i)
            dK_j += scale · dSᵀ Q_i
            dQ_i += scale · dS K_j                       (many key blocks add into the same dQ_i)

causal=True is bottom-right aligned: query i sees key j iff j <= i + (Nk − Nq). Rows that see no
key have zero gradients. Blocks may be partial at the end. o and lse come from the forward.
"""

import numpy as np


def fa2_backward(q, k, v, o, lse, do, scale, causal, block_q, block_k):
    """All float64: q, o, do (Nq, d); k, v (Nk, d); lse (Nq,). Returns (dq, dk, dv)."""
    raise NotImplementedError
