"""Solution for algorithm/window_interval (the task is in stub.py)."""


def window_interval(i, seqlen_q, seqlen_k, left, right, causal, align):
    shift = seqlen_k - seqlen_q if align == "bottom_right" else 0
    if causal:
        right = 0
    lo = 0 if left < 0 else max(0, i + shift - left)
    hi = seqlen_k - 1 if right < 0 else min(seqlen_k - 1, i + shift + right)
    return lo, hi
