"""Mutant: R(i, j) = A(i) * size(B) + B(j): the copies interleaved element by element."""

import numpy as np


def leaves(t):
    return [x for s in t for x in leaves(s)] if isinstance(t, tuple) else [t]


def size(shape):
    n = 1
    for s in leaves(shape):
        n *= s
    return n


def ev(layout, i):
    """A layout applied to a 1-D index (leftmost mode fastest)."""
    out = 0
    for s, d in zip(leaves(layout[0]), leaves(layout[1])):
        out += (i % s) * d
        i //= s
    return out


def logical_product(a, b):
    na, nb = size(a[0]), size(b[0])
    out = np.zeros((na, nb), np.int64)
    for i in range(na):
        for j in range(nb):
            out[i, j] = ev(a, i) * nb + ev(b, j)
    return out
