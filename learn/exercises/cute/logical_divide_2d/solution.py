"""Solution for cute/logical_divide_2d (the task is in stub.py)."""

import numpy as np


def logical_divide_2d(a, tm, tn):
    (m, n), (dm, dn) = a
    i, bi, j, bj = np.meshgrid(np.arange(tm), np.arange(m // tm), np.arange(tn), np.arange(n // tn),
                               indexing="ij")
    return (i + tm * bi) * dm + (j + tn * bj) * dn
