"""Exercise algorithm/window_interval — sliding-window (local) attention as a key interval.

window = (left, right) bounds how far query row i looks on either side of its diagonal key
i + shift; -1 means unbounded on that side (docs/algorithm.md, section 6, RowMask):

    shift = Nk - Nq  (align "bottom_right")   or   0  (align "top_left")
    if causal: right = 0
    lo = max(0,      i + shift - left)     (lo = 0      when left  = -1)
    hi = min(Nk - 1, i + shift + right)    (hi = Nk - 1 when right = -1)

The row is empty when hi < lo (return any such pair). Example, N = 6, causal, left = 2:
row 0 -> (0, 0), row 3 -> (1, 3), row 5 -> (3, 5).
"""


def window_interval(i, seqlen_q, seqlen_k, left, right, causal, align):
    """Returns (lo, hi), ints."""
    raise NotImplementedError
