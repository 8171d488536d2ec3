"""Exercise algorithm/fa1_forward — FlashAttention-1's loop order (Dao et al. 2022, Algorithm 1).

KV blocks OUTSIDE, query blocks INSIDE. Because every query block is revisited once per key block,
its state lives in "HBM": arrays O (NORMALIZED output so far), l and m for all rows, read at the
start of each inner step and written back at its end. For query block i and key block j:

    S   = scale * Q_i K_j^T                          (Br x Bc)
    m~  = rowmax(S);  P~ = exp(S - m~);  l~ = rowsum(P~)
    m'  = max(m_i, m~)
    l'  = exp(m_i - m') l_i + exp(m~ - m') l~
    O_i = ( l_i exp(m_i - m') O_i  +  exp(m~ - m') P~ V_j ) / l'
    write O_i, l' -> l_i, m' -> m_i

Start from O = 0, l = 0, m = -inf (the first step then has exp(m_i - m') = 0). At the end
LSE = m + log l. No mask here: every row sees every key, so l > 0 after the first block.
Blocks: query block i covers rows [i*Br, min((i+1)*Br, Nq)), key block j keys
[j*Bc, min((j+1)*Bc, Nk)) — the last block of each may be partial; do not drop it.
docs/learn/01-flash-attention-1.md; docs/algorithm.md, section 4.
"""

import numpy as np


def fa1_forward(q, k, v, scale, block_q, block_k):
    """q (Nq, d), k and v (Nk, d), float64. Returns (out (Nq, d), lse (Nq,))."""
    raise NotImplementedError
