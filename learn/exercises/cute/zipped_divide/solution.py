"""Solution for cute/zipped_divide (the task is in stub.py)."""

import numpy as np


def zipped_divide(a, tm, tn):
    (m, n), (dm, dn) = a
    i, j, bi, bj = np.meshgrid(np.arange(tm), np.arange(tn), np.arange(m // tm), np.arange(n // tn),
                               indexing="ij")
    return (i + tm * bi) * dm + (j + tn * bj) * dn
