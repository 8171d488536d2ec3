"""Mutant: top-left causal alignment (row i sees keys up to i), not flashlab's bottom-right."""


def products(seqlen_q, seqlen_k, causal, block_m, block_n):
    total = 0
    for i0 in range(0, seqlen_q, block_m):
        i1 = min(i0 + block_m, seqlen_q) - 1
        hi = min(seqlen_k - 1, i1) if causal else seqlen_k - 1
        if hi >= 0:
            total += block_m * (hi // block_n + 1)
    return total


def choose(seqlen_q, seqlen_k, causal, wide, narrow, efficiency):
    w = products(seqlen_q, seqlen_k, causal, *wide)
    n = products(seqlen_q, seqlen_k, causal, *narrow)
    return "narrow" if n < efficiency * w else "wide"
