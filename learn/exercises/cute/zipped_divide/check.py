"""Spec of cute/zipped_divide: pycute's zipped_divide(A, (tm, tn)) as a 4-D table."""

from cute.common import cute, equal_table, pow2, table

CONCEPT = "zipped_divide: ((tm, tn), (M/tm, N/tn)) = (one tile, which tile); what local_tile slices"
NEEDS_GPU = False


def check(mod, rng):
    c = cute()
    cases = [((128, 64), (64, 1), 64, 32), ((8, 6), (1, 8), 4, 2), ((16, 8), (8, 1), 2, 8)]
    for _ in range(15):
        m, n = pow2(rng, 1, 6), pow2(rng, 1, 6)
        tm, tn = pow2(rng, 0, m.bit_length() - 1), pow2(rng, 0, n.bit_length() - 1)
        cases.append(((m, n), [(n, 1), (1, m)][int(rng.integers(2))], tm, tn))
    for shape, stride, tm, tn in cases:
        a = c.Layout(shape, stride)
        exp = table(c.zipped_divide(a, (c.Layout(tm), c.Layout(tn))))
        equal_table(f"zipped_divide({a}, ({tm}, {tn}))", mod.zipped_divide((shape, stride), tm, tn), exp,
                    what="T[i, j, bi, bj]")
