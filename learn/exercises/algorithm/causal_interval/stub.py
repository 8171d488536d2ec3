"""Exercise algorithm/causal_interval — the keys a causal query row may see.

A mask is an interval on the key index: query row i sees keys [lo, hi] (empty when hi < lo).
Causal "query i may not see later keys" needs an anchor when Nq != Nk (docs/algorithm.md, sec. 6):

    align "bottom_right" (FlashAttention-2, default): j <= i + (Nk - Nq)   the LAST query meets the LAST key
    align "top_left"     (PyTorch SDPA is_causal):     j <= i              the FIRST query meets the FIRST key

Clamp to the existing keys [0, Nk - 1]. Example, Nq = 3, Nk = 5: bottom-right gives row 0 ->
(0, 2), row 2 -> (0, 4); top-left gives row 0 -> (0, 0), row 2 -> (0, 2). With Nq = 5, Nk = 3,
bottom-right rows 0 and 1 are empty: return (0, -1) for them (any hi < lo is accepted).
"""


def causal_interval(i, seqlen_q, seqlen_k, align):
    """Returns (lo, hi), ints: the visible keys of query row i. align: "bottom_right" or "top_left"."""
    raise NotImplementedError
