"""Mutant: the last visited block is taken from the FIRST row's hi: keys of later rows are skipped."""


def key_blocks(q_block, block_q, block_k, seqlen_q, seqlen_k, causal, window_left):
    shift = seqlen_k - seqlen_q
    right = 0 if causal else -1

    def interval(i):
        lo = 0 if window_left < 0 else max(0, i + shift - window_left)
        hi = seqlen_k - 1 if right < 0 else min(seqlen_k - 1, i + shift + right)
        return lo, hi

    i0 = q_block * block_q
    i1 = min(i0 + block_q, seqlen_q) - 1
    (lo0, hi0), (lo1, hi1) = interval(i0), interval(i1)
    # the first rows may be empty (hi < lo); the first non-empty row has lo >= lo0, so [lo0, hi1]
    # still bounds the union of the visible keys
    if hi1 < lo1:
        return [], []
    visit = list(range(lo0 // block_k, hi0 // block_k + 1))
    masked = []
    for j in visit:
        k0, k1 = j * block_k, min((j + 1) * block_k, seqlen_k) - 1
        if not (lo1 <= k0 and k1 <= hi0):
            masked.append(j)
    return visit, masked
