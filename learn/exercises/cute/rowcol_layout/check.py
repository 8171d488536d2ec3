"""Spec of cute/rowcol_layout: flashlab's rowcol_layout rebuilt with pycute."""

from grading import Fail
from cute.common import cute, same_layout

CONCEPT = "rowcol_layout: ((2,2),MMA_M,MMA_N) -> ((2,MMA_M),(2,MMA_N)), rows = (row half, m tile)"
NEEDS_GPU = False


def ref(mm, mn):
    c = cute()
    acc = c.Layout(((2, 2), mm, mn), ((1, 2), 4, 4 * mm))
    return c.make_layout(c.make_layout(acc[0][1], acc[1]), c.make_layout(acc[0][0], acc[2]))


def check(mod, rng):
    cute()
    cases = [(1, 1), (1, 8), (2, 8), (4, 16), (int(rng.integers(1, 5)), int(rng.integers(1, 9)))]
    for mm, mn in cases:
        exp = ref(mm, mn)
        same_layout(f"MMA_M {mm}, MMA_N {mn}", mod.rowcol(mm, mn), exp, what="rowcol")
        for r in range(2 * mm):
            for col in range(2 * mn):
                if mod.register(r, col, mm, mn) != exp((r, col)):
                    raise Fail(f"register MMA_M {mm}, MMA_N {mn}",
                               f"row {r}, col {col}: got {mod.register(r, col, mm, mn)}, expected {exp((r, col))}")
