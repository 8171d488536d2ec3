"""Spec of cute/layout_index: coordinate -> offset, 1-D index split colexicographically, strides."""

from grading import Fail
from cute.common import cute

CONCEPT = "layout = function: offset = sum coord_i * stride_i; an int index splits leftmost-mode-fastest"
NEEDS_GPU = False

def rand_shape(rng, depth=2):
    """A random (possibly nested) shape of rank 1..3, modes 1..6."""
    modes = []
    for _ in range(int(rng.integers(1, 4))):
        if depth > 1 and rng.integers(3) == 0:
            modes.append(rand_shape(rng, depth - 1))
        else:
            modes.append(int(rng.integers(1, 7)))
    return tuple(modes) if len(modes) > 1 or rng.integers(2) else modes[0]


def rand_coord(rng, shape):
    if isinstance(shape, tuple):
        return tuple(rand_coord(rng, s) if rng.integers(4) else int(rng.integers(cute().size(s)))
                     for s in shape)
    return int(rng.integers(shape))


def check(mod, rng):
    c = cute()
    fixed = [((4, 8), (8, 1)), ((4, 8), (1, 4)), (((2, 4), 8), ((1, 16), 2)), ((3, (2, 5)), (10, (1, 3)))]
    cases = list(fixed)
    for _ in range(40):
        shape = rand_shape(rng)
        flat = c.flatten(shape) if isinstance(shape, tuple) else (shape,)
        strides = [int(rng.integers(0, 40)) for _ in flat]
        it = iter(strides)
        stride = _unflatten(shape, it)
        cases.append((shape, stride))
    for shape, stride in cases:
        name = f"{shape}:{stride}"
        for i in range(c.size(shape)):
            got, exp = mod.crd2idx(i, shape, stride), c.crd2idx(i, shape, stride)
            if got != exp:
                raise Fail(f"index {name}", f"1-D index {i}: got {got}, expected {exp}")
        for _ in range(5):
            crd = rand_coord(rng, shape)
            got, exp = mod.crd2idx(crd, shape, stride), c.crd2idx(crd, shape, stride)
            if got != exp:
                raise Fail(f"coordinate {name}", f"coord {crd}: got {got}, expected {exp}")
    for _ in range(20):
        shape = tuple(int(rng.integers(1, 9)) for _ in range(int(rng.integers(1, 5))))
        if len(shape) > 1 and shape[0] == shape[-1] == 1:
            shape = (2,) + shape[1:]
        exp = c.prefix_product(shape)
        exp = exp if isinstance(exp, tuple) else (exp,)
        if tuple(mod.col_major(shape)) != exp:
            raise Fail("col_major", f"shape {shape}: got {tuple(mod.col_major(shape))}, expected {exp}")
        exp = tuple(reversed(c.prefix_product(tuple(reversed(shape)))))
        if tuple(mod.row_major(shape)) != exp:
            raise Fail("row_major", f"shape {shape}: got {tuple(mod.row_major(shape))}, expected {exp}")


def _unflatten(shape, it):
    if isinstance(shape, tuple):
        return tuple(_unflatten(s, it) for s in shape)
    return next(it)
