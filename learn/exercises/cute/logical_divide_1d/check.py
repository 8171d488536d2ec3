"""Spec of cute/logical_divide_1d: the values of pycute's logical_divide(A, B) as a (tile, rest) table."""

import numpy as np
from cute.common import cute, equal_table, pow2, rand_compact

CONCEPT = "logical_divide(A, B) = A o (B, B*): R(i, j) = A(B(i) + B*(j)), mode 0 in a tile, mode 1 over tiles"
NEEDS_GPU = False


def ref(a, b):
    c = cute()
    r = c.logical_divide(a, b)
    n0, n1 = c.size(r[0]), c.size(r[1])
    return np.array([[r((i, j)) for j in range(n1)] for i in range(n0)], np.int64)


def check(mod, rng):
    c = cute()
    cases = [(c.Layout((4, 2, 3), (2, 1, 8)), c.Layout(4, 2)), (c.Layout(16, 3), c.Layout(4, 1)),
             (c.Layout((8, 4), (4, 1)), c.Layout((2, 2), (1, 8)))]
    for _ in range(20):
        a = rand_compact(rng, [pow2(rng, 1, 3) for _ in range(int(rng.integers(1, 4)))])
        if not isinstance(a.shape, tuple) or rng.integers(2):
            a = c.Layout(c.size(a), int(rng.integers(1, 4)))
        n = c.size(a)
        bn = pow2(rng, 0, max(0, n.bit_length() - 2))
        bd = pow2(rng, 0, max(0, (n // bn).bit_length() - 1))
        cases.append((a, c.Layout(bn, bd)))
    for a, b in cases:
        got = mod.logical_divide_1d((a.shape, a.stride), (b.shape, b.stride))
        equal_table(f"A = {a}, B = {b}", got, ref(a, b), what="T[i, j]")
