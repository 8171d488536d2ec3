"""Exercise algorithm/fully_masked_rows — finish the online softmax: O = O / l, LSE = m + log l.

After the last key block each row has a running max m, sum l and unnormalized output O
(algorithm/online_softmax). The results are

    out = O / l            LSE = m + log(l)

A row that saw no key at all (causal bottom-right with seqlen_q > seqlen_k leaves the first
seqlen_q - seqlen_k rows empty) ends with m = -inf, l = 0, O = 0. flashlab's contract for it:
out = 0 (not 0/0 = NaN) and LSE = -inf (the log of an empty sum; not 0, not NaN).
Test l == 0 before dividing. docs/algorithm.md, section 3 ("Rows that stay empty").
"""

import numpy as np


def finalize(m, l, O):
    """m, l: (rows,) float64; O: (rows, d). Returns (out (rows, d), lse (rows,))."""
    raise NotImplementedError
