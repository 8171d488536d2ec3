"""Mutant: the row stride applied to columns and the column stride to rows."""

import numpy as np


def logical_divide_2d(a, tm, tn):
    (m, n), (dm, dn) = a
    i, bi, j, bj = np.meshgrid(np.arange(tm), np.arange(m // tm), np.arange(tn), np.arange(n // tn),
                               indexing="ij")
    return (i + tm * bi) * dn + (j + tn * bj) * dm
