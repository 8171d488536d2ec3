"""Spec of cute/swizzle_fn: pycute's Swizzle(B, M, S) on every offset of its period and beyond."""

from grading import Fail
from cute.common import cute

CONCEPT = "Swizzle<B,M,S>(x) = x ^ ((x & yyy_mask) >> S): bits [M+S, M+S+B) XORed into [M, M+B)"
NEEDS_GPU = False


def check(mod, rng):
    c = cute()
    cases = [(3, 3, 3), (2, 3, 3), (3, 4, 3), (2, 0, 4)]
    for _ in range(8):
        b = int(rng.integers(1, 4))
        cases.append((b, int(rng.integers(0, 5)), int(rng.integers(b, 5))))
    for b, m, s in cases:
        sw = c.Swizzle(b, m, s)
        xs = list(range(min(4 * sw.size(), 4096))) + [int(x) for x in rng.integers(0, 1 << 20, 50)]
        for x in xs:
            got = mod.swizzle(b, m, s, x)
            if got != sw(x):
                raise Fail(f"Swizzle<{b},{m},{s}>", f"offset {x} ({x:#b}): got {got}, expected {sw(x)}")
