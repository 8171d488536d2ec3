"""Exercise algorithm/lse_row — the log-sum-exp of one row of scores.

    LSE(s) = log sum_j exp(s_j)

Computed naively, exp(s_j) overflows float64 for s_j > 709 (float32: > 88.7). Subtract the row max
m first:  LSE = m + log sum_j exp(s_j - m); every exponent is then <= 0 and the max term is 1.

Masked scores are -inf (exp(-inf) = 0). A row whose entries are ALL -inf sees no key: its LSE is
-inf (the log of an empty sum), never NaN and never 0. Careful: s - m = -inf - (-inf) = NaN there.

docs/algorithm.md, section 3 ("Numerical safety").
"""

import numpy as np


def lse_row(s):
    """s: 1-D float64 array (may contain -inf). Returns a Python float or 0-d array: LSE(s)."""
    raise NotImplementedError
