"""Mutant: row = bi + (M / tm) * i: the tile's rows strided (tile and rest swapped)."""

import numpy as np


def logical_divide_2d(a, tm, tn):
    (m, n), (dm, dn) = a
    i, bi, j, bj = np.meshgrid(np.arange(tm), np.arange(m // tm), np.arange(tn), np.arange(n // tn),
                               indexing="ij")
    return (bi + (m // tm) * i) * dm + (j + tn * bj) * dn
