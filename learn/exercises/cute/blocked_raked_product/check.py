"""Spec of cute/blocked_raked_product: CuTe's blocked_product / raked_product (built from pycute)."""

from cute.common import blocked_product, cute, equal_table, rand_compact, raked_product, table

CONCEPT = "blocked_product keeps each tile contiguous ((a0,b0),(a1,b1)); raked_product interleaves ((b0,a0),(b1,a1))"
NEEDS_GPU = False


def check(mod, rng):
    c = cute()
    cases = [(c.Layout((2, 5), (5, 1)), c.Layout((3, 4), (1, 3))), (c.Layout((2, 2), (1, 2)), c.Layout((2, 3), (3, 1)))]
    for _ in range(15):
        a = rand_compact(rng, (int(rng.integers(1, 5)), int(rng.integers(1, 5))))
        b = rand_compact(rng, (int(rng.integers(1, 5)), int(rng.integers(1, 5))))
        cases.append((a, b))
    for a, b in cases:
        shape = (c.size(a[0]) * c.size(b[0]), c.size(a[1]) * c.size(b[1]))
        for kind, fn, ref in (("blocked", mod.blocked, blocked_product), ("raked", mod.raked, raked_product)):
            exp = table(ref(a, b)).reshape(shape, order="F")
            got = fn((a.shape, a.stride), (b.shape, b.stride))
            equal_table(f"{kind} A = {a}, B = {b}", got, exp, what=f"{kind}[r, c]")
