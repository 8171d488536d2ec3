"""Mutant: the rest modes in the order (N / tn, M / tm)."""

import numpy as np


def zipped_divide(a, tm, tn):
    (m, n), (dm, dn) = a
    i, j, bj, bi = np.meshgrid(np.arange(tm), np.arange(tn), np.arange(n // tn), np.arange(m // tm),
                               indexing="ij")
    return (i + tm * bi) * dm + (j + tn * bj) * dn
