"""Spec of cute/coalesce: exactly pycute's coalesce (its result is the canonical form)."""

from cute.common import cute, rand_compact, same_layout

CONCEPT = "coalesce: drop shape-1 modes, merge s0:d0, s1:d1 when d1 == s0*d0; same function, fewer modes"
NEEDS_GPU = False


def norm(got):
    s, d = got
    return (s[0], d[0]) if isinstance(s, tuple) and len(s) == 1 else (s, d)


def check(mod, rng):
    c = cute()
    cases = [((2, 4), (1, 2)), ((2, (1, 6)), (1, (6, 2))), ((4, 2), (2, 1)), ((1, 1), (3, 5)),
             ((2, 4, 3), (12, 3, 1)), ((4, 2, 3), (1, 4, 16))]
    for _ in range(40):
        base = rand_compact(rng, [int(rng.integers(1, 5)) for _ in range(int(rng.integers(2, 5)))])
        shape, stride = list(c.flatten(base.shape)), list(c.flatten(base.stride))
        if rng.integers(2):  # a gap or a shape-1 mode with a junk stride
            k = int(rng.integers(len(shape)))
            if rng.integers(2):
                stride[k] *= 2
            else:
                shape.insert(k, 1)
                stride.insert(k, int(rng.integers(1, 50)))
        cases.append((tuple(shape), tuple(stride)))
    for shape, stride in cases:
        exp = c.coalesce(c.Layout(shape, stride))
        same_layout(f"coalesce {shape}:{stride}", norm(mod.coalesce(shape, stride)), exp)
