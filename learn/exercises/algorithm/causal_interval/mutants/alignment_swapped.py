"""Mutant: the two alignments swapped."""


def causal_interval(i, seqlen_q, seqlen_k, align):
    shift = seqlen_k - seqlen_q if align == "top_left" else 0
    return 0, min(seqlen_k - 1, i + shift)
