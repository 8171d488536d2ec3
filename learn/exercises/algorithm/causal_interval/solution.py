"""Solution for algorithm/causal_interval (the task is in stub.py)."""


def causal_interval(i, seqlen_q, seqlen_k, align):
    shift = seqlen_k - seqlen_q if align == "bottom_right" else 0
    return 0, min(seqlen_k - 1, i + shift)
