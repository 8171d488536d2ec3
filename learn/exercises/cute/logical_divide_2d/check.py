"""Spec of cute/logical_divide_2d: pycute's logical_divide(A, (tm, tn)) as a 4-D table."""

from cute.common import cute, equal_table, pow2, table

CONCEPT = "logical_divide by a tuple tiler: (M, N) -> ((tm, M/tm), (tn, N/tn)), each mode split"
NEEDS_GPU = False


def check(mod, rng):
    c = cute()
    cases = [((8, 6), (6, 1), 2, 3), ((16, 8), (1, 16), 4, 2), ((8, 8), (9, 1), 2, 4)]
    for _ in range(15):
        m, n = pow2(rng, 1, 5), pow2(rng, 1, 5)
        tm, tn = pow2(rng, 0, m.bit_length() - 1), pow2(rng, 0, n.bit_length() - 1)
        k = int(rng.integers(3))
        stride = [(n, 1), (1, m), (n + 1, 1)][k]
        cases.append(((m, n), stride, tm, tn))
    for shape, stride, tm, tn in cases:
        a = c.Layout(shape, stride)
        exp = table(c.logical_divide(a, (c.Layout(tm), c.Layout(tn))))
        equal_table(f"{a} / ({tm}, {tn})", mod.logical_divide_2d((shape, stride), tm, tn), exp,
                    what="T[i, bi, j, bj]")
