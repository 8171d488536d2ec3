"""Mutant: hi is not clamped to Nk - 1 (top-left with Nq > Nk runs past the keys)."""


def causal_interval(i, seqlen_q, seqlen_k, align):
    shift = seqlen_k - seqlen_q if align == "bottom_right" else 0
    return 0, i + shift
