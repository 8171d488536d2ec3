"""Spec of cute/logical_product: pycute's logical_product(A, B) as a (tile, copy) table."""

import numpy as np
from cute.common import cute, equal_table, rand_compact

CONCEPT = "logical_product(A, B) = (A, A* o B): tile A repeated, copy j at size(A) * B(j)"
NEEDS_GPU = False


def check(mod, rng):
    c = cute()
    cases = [(c.Layout((2, 2), (1, 2)), c.Layout(3, 2)), (c.Layout((2, 4), (4, 1)), c.Layout((2, 3), (3, 1))),
             (c.Layout(4, 1), c.Layout((2, 2), (1, 4)))]
    for _ in range(20):
        a = rand_compact(rng, [int(rng.integers(1, 5)) for _ in range(int(rng.integers(1, 3)))])
        bs = tuple(int(rng.integers(1, 5)) for _ in range(int(rng.integers(1, 3))))
        bd = tuple(int(rng.integers(1, 6)) for _ in bs)
        cases.append((a, c.Layout(bs, bd) if len(bs) > 1 else c.Layout(bs[0], bd[0])))
    for a, b in cases:
        r = c.logical_product(a, b)
        exp = np.array([[r((i, j)) for j in range(c.size(b))] for i in range(c.size(a))], np.int64)
        got = mod.logical_product((a.shape, a.stride), (b.shape, b.stride))
        equal_table(f"A = {a}, B = {b}", got, exp, what="T[i, j]")
