"""Spec of algorithm/window_interval: every row of several shapes and windows."""

from grading import same_interval
from reference import interval

CONCEPT = "sliding-window intervals: left/right bounds around the shifted diagonal, -1 unbounded, clamping"
NEEDS_GPU = False


def check(mod, rng):
    windows = [(2, -1, True), (-1, 0, False), (1, 2, False), (3, 3, True), (0, 0, False), (-1, -1, False),
               (int(rng.integers(0, 5)), int(rng.integers(1, 5)), False)]
    shapes = [(6, 6), (3, 8), (8, 3), (1, 5)] + [tuple(int(x) for x in rng.integers(1, 12, size=2))]
    for align in ("bottom_right", "top_left"):
        for left, right, causal in windows:
            for sq, sk in shapes:
                for i in range(sq):
                    same_interval(
                        f"{align} window ({left}, {right}){' causal' if causal else ''} Nq {sq} Nk {sk} row {i}",
                        mod.window_interval(i, sq, sk, left, right, causal, align),
                        interval(i, sq, sk, causal=causal, align=align, left=left, right=right))
