"""Spec of algorithm/causal_interval: every row of several shapes, both alignments."""

from grading import same_interval
from reference import interval

CONCEPT = "causal mask as a key interval: bottom-right vs top-left alignment, clamping, empty rows"
NEEDS_GPU = False


def check(mod, rng):
    shapes = [(3, 5), (5, 3), (4, 4), (1, 6), (6, 1)]
    shapes += [tuple(int(x) for x in rng.integers(1, 12, size=2)) for _ in range(3)]
    for align in ("bottom_right", "top_left"):
        for sq, sk in shapes:
            for i in range(sq):
                same_interval(f"{align} Nq {sq} Nk {sk} row {i}", mod.causal_interval(i, sq, sk, align),
                              interval(i, sq, sk, causal=True, align=align))
