"""Solution for cute/copy_partition (the task is in stub.py)."""

import numpy as np


def partition(t, tile, thr, vec):
    (m, n), (tm, tn) = tile, thr
    v, i, j = np.meshgrid(np.arange(vec), np.arange(m // tm), np.arange(n // (tn * vec)), indexing="ij")
    row = t // tn + tm * i
    col = (t % tn) * vec + v + tn * vec * j
    return row * n + col
