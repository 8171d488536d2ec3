"""Mutant: a tile's key blocks from its FIRST row (under a causal mask the last row sees the most)."""


def products(seqlen_q, seqlen_k, causal, block_m, block_n):
    shift = seqlen_k - seqlen_q
    total = 0
    for i0 in range(0, seqlen_q, block_m):
        hi = min(seqlen_k - 1, i0 + shift) if causal else seqlen_k - 1
        if hi >= 0:
            total += block_m * (hi // block_n + 1)
    return total


def choose(seqlen_q, seqlen_k, causal, wide, narrow, efficiency):
    w = products(seqlen_q, seqlen_k, causal, *wide)
    n = products(seqlen_q, seqlen_k, causal, *narrow)
    return "narrow" if n < efficiency * w else "wide"
