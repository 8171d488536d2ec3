"""Mutant: threads numbered down the columns: thread t at (t % tm, t / tm)."""

import numpy as np


def partition(t, tile, thr, vec):
    (m, n), (tm, tn) = tile, thr
    v, i, j = np.meshgrid(np.arange(vec), np.arange(m // tm), np.arange(n // (tn * vec)), indexing="ij")
    row = t % tm + tm * i
    col = (t // tm) * vec + v + tn * vec * j
    return row * n + col
