"""Mutant: the bottom-right shift computed as Nq - Nk."""


def causal_interval(i, seqlen_q, seqlen_k, align):
    shift = seqlen_q - seqlen_k if align == "bottom_right" else 0
    return 0, min(seqlen_k - 1, i + shift)
