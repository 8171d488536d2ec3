"""Spec of cute/right_inverse: pycute's right_inverse, as a function, and L(R(i)) == i."""

from grading import Fail
from cute.common import as_layout, cute, pow2, rand_compact, same_function

CONCEPT = "right_inverse R: L(R(i)) = i; sort modes by stride, stop at a gap; offset -> coordinate"
NEEDS_GPU = False


def check(mod, rng):
    c = cute()
    cases = [c.Layout((4, 8), (8, 1)), c.Layout((4, 2), (1, 8)), c.Layout((2, 4, 2), (8, 1, 4))]
    for _ in range(30):
        a = rand_compact(rng, [pow2(rng, 1, 2) for _ in range(int(rng.integers(2, 4)))])
        sh, st = list(a.shape), list(a.stride)
        perm = rng.permutation(len(sh))
        sh, st = [sh[i] for i in perm], [st[i] for i in perm]
        if rng.integers(3) == 0:
            k = int(rng.integers(len(st)))
            st = [d * 2 if d >= st[k] else d for d in st]
        cases.append(c.Layout(tuple(sh), tuple(st)))
    for lay in cases:
        name = f"right_inverse({lay})"
        got = mod.right_inverse(lay.shape, lay.stride)
        same_function(name, got, c.right_inverse(lay), what="R", ranks=False)
        r = as_layout(name, got)
        for i in range(c.size(r)):
            if lay(r(i)) != i:
                raise Fail(name, f"L(R({i})) = {lay(r(i))}")
