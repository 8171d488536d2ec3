"""Mutant: the two ranges concatenated: a block where they overlap is visited twice."""


def interval(i, seqlen_q, seqlen_k, causal, window_left):
    shift = seqlen_k - seqlen_q
    lo = 0 if window_left < 0 else max(0, i + shift - window_left)
    hi = min(seqlen_k - 1, i + shift) if causal else seqlen_k - 1
    return lo, hi


def sink_keys(i, seqlen_q, seqlen_k, causal, window_left, sink_tokens):
    lo, hi = interval(i, seqlen_q, seqlen_k, causal, window_left)
    return max(0, min(sink_tokens, lo, hi + 1))


def key_blocks(q_block, block_q, block_k, seqlen_q, seqlen_k, causal, window_left, sink_tokens):
    i0 = q_block * block_q
    i1 = min(i0 + block_q, seqlen_q) - 1
    lo0, _ = interval(i0, seqlen_q, seqlen_k, causal, window_left)
    lo1, hi1 = interval(i1, seqlen_q, seqlen_k, causal, window_left)
    blocks = []
    if hi1 >= lo1:
        blocks += list(range(lo0 // block_k, hi1 // block_k + 1))
    s1 = sink_keys(i1, seqlen_q, seqlen_k, causal, window_left, sink_tokens)
    blocks += list(range(0, -(-s1 // block_k)))
    return sorted(blocks)
