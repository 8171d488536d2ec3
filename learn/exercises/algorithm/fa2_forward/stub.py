"""Exercise algorithm/fa2_forward — FlashAttention-2's loop order, with the causal mask.

Query blocks OUTSIDE, key blocks INSIDE (Dao 2023). The state m, l, O of a query block stays "in
registers" (local variables) for the whole inner loop; O is UNNORMALIZED during the loop and is
divided by l once at the end (algorithm/online_softmax, algorithm/fully_masked_rows):

    for each query block i:
        m = -inf, l = 0, O = 0
        for each key block j:
            S = scale * Q_i K_j^T, with masked entries set to -inf
            online-softmax update of m, l, O
        out_i = O / l;  LSE_i = m + log l        (empty rows: out 0, LSE -inf)

causal=True uses the bottom-right alignment (FlashAttention-2's): query i sees key j iff
j <= i + (Nk - Nq). With Nq > Nk the first Nq - Nk rows see no key at all.
Blocks may be partial at the end (rows [i*Br, min((i+1)*Br, Nq)), likewise keys).
Optional: skip key blocks that lie wholly right of the diagonal (algorithm/block_skipping).
docs/learn/02-flash-attention-2.md; docs/algorithm.md, sections 4 and 6.
"""

import numpy as np


def fa2_forward(q, k, v, scale, causal, block_q, block_k):
    """q (Nq, d), k and v (Nk, d), float64. Returns (out (Nq, d), lse (Nq,))."""
    raise NotImplementedError
