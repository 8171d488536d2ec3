"""Mutant: returns B(i) + B*(j), the positions in A's domain, without applying A."""

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


def complement(layout, cotarget):
    rs, rd, cur = [], [], 1
    for d, s in sorted(zip(leaves(layout[1]), leaves(layout[0]))):
        if d == 0 or s == 1:
            continue
        rs.append(d // cur)
        rd.append(cur)
        cur = s * d
    rs.append(-(-cotarget // cur))
    rd.append(cur)
    return tuple(rs), tuple(rd)


def logical_divide_1d(a, b):
    rest = complement(b, size(a[0]))
    nb, nr = size(b[0]), size(a[0]) // size(b[0])
    out = np.zeros((nb, nr), np.int64)
    for i in range(nb):
        for j in range(nr):
            out[i, j] = ev(b, i) + ev(rest, j)
    return out
