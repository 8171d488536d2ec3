"""Mutant: element i of tile bi is row bi + (M / tm) * i (tiles interleaved, not blocks)."""

import numpy as np


def zipped_divide(a, tm, tn):
    (m, n), (dm, dn) = a
    i, j, bi, bj = np.meshgrid(np.arange(tm), np.arange(tn), np.arange(m // tm), np.arange(n // tn),
                               indexing="ij")
    return (bi + (m // tm) * i) * dm + (j + tn * bj) * dn
