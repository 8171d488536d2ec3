"""Spec of cute/size_cosize."""

from grading import Fail
from cute.common import cute

CONCEPT = "size = product of the shape; cosize = L(size-1)+1, the memory extent (gaps, broadcasts)"
NEEDS_GPU = False


def check(mod, rng):
    c = cute()
    cases = [((4, 8), (8, 1)), ((4, 8), (1, 8)), (((2, 2), 8), ((1, 0), 4)), (16, 2), ((2, 3), (0, 0))]
    for _ in range(30):
        shape = tuple(int(rng.integers(1, 7)) for _ in range(int(rng.integers(2, 4))))
        stride = tuple(int(rng.integers(0, 30)) for _ in shape)
        if rng.integers(2):
            shape, stride = (shape[:1] + (shape[1:],), stride[:1] + (stride[1:],))
        cases.append((shape, stride))
    for shape, stride in cases:
        lay = c.Layout(shape, stride)
        if mod.size(shape) != c.size(lay):
            raise Fail(f"size {lay}", f"got {mod.size(shape)}, expected {c.size(lay)}")
        if mod.cosize(shape, stride) != c.cosize(lay):
            raise Fail(f"cosize {lay}", f"got {mod.cosize(shape, stride)}, expected {c.cosize(lay)}")
