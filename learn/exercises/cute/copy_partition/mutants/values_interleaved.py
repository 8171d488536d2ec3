"""Mutant: value v at column (t % tn) + tn * v: values strided by the thread count, not a 16-byte vector."""

import numpy as np


def partition(t, tile, thr, vec):
    (m, n), (tm, tn) = tile, thr
    v, i, j = np.meshgrid(np.arange(vec), np.arange(m // tm), np.arange(n // (tn * vec)), indexing="ij")
    row = t // tn + tm * i
    col = (t % tn) + tn * v + tn * vec * j
    return row * n + col
