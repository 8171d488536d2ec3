"""Mutant: the 8-column offset of tile j is forgotten (every tile lands on columns 0..7)."""

import numpy as np


def acc_coord(lane, r):
    j, i = divmod(r, 4)
    return lane // 4 + 8 * (i // 2), 2 * (lane % 4) + i % 2


def gather(frags):
    frags = np.asarray(frags)
    out = np.zeros((16, 2 * frags.shape[1]), frags.dtype)
    for lane in range(32):
        for r in range(frags.shape[1]):
            out[acc_coord(lane, r)] = frags[lane, r]
    return out
