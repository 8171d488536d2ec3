"""Exercise algorithm/hand_trace — trace the online softmax state block by block.

Do the tiny case BY HAND first (paper and a calculator), then write `trace` and compare:

    Q = [[1, 0], [0, 1], [1, 1], [-1, 1]]     K = [[1, 0], [0, 1], [1, 1], [2, 0]]
    V = [[1, 2], [3, 4], [5, 6], [7, 8]]      scale = 1, block = 2 (two key blocks), no mask

For every query row keep m (running max), l (running sum) and the UNNORMALIZED O
(algorithm/online_softmax), starting from m = -inf, l = 0, O = 0, and record the state after each
key block. Row 0's scores are [1, 0 | 1, 2]; after block 0: m = 1, l = 1 + e^-1 = 1.367879,
O = 1·[1, 2] + e^-1·[3, 4] = [2.103638, 3.471518]. Continue: block 1 raises row 0's max to 2, so
the old l and O are rescaled by e^(1 - 2) before the new terms are added. At the end O / l is the
attention output and m + log l the LSE.

trace(q, k, v, scale, block) returns a list with one entry per key block (ceil(Nk / block) of
them; the last block may be partial), each a tuple (m (Nq,), l (Nq,), O (Nq, d)) — the state
AFTER that block, O not divided by l. The checker compares the tiny case above first, then random
shapes.
"""

import numpy as np


def trace(q, k, v, scale, block):
    raise NotImplementedError
