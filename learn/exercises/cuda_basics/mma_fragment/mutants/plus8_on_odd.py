"""Mutant: +8 rows on odd registers and +1 column on i >= 2 (the roles of the i bits swapped)."""

import numpy as np


def acc_coord(lane, r):
    j, i = divmod(r, 4)
    return lane // 4 + 8 * (i % 2), 8 * j + 2 * (lane % 4) + i // 2


def gather(frags):
    frags = np.asarray(frags)
    out = np.zeros((16, 2 * frags.shape[1]), frags.dtype)
    for lane in range(32):
        for r in range(frags.shape[1]):
            out[acc_coord(lane, r)] = frags[lane, r]
    return out
