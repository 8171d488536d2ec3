"""Spec of cute/complement: the same function as pycute's complement(A, cotarget)."""

from cute.common import cute, pow2, same_function

CONCEPT = "complement(A, M): the gaps of A then its repeats up to M; (A, A*) covers 0..M-1 once"
NEEDS_GPU = False


def rand_case(rng):
    c = cute()
    modes, cur = [], 1
    for _ in range(int(rng.integers(1, 4))):
        d = cur * pow2(rng, 0, 2)
        s = pow2(rng, 1, 2)
        modes.append((s, d))
        cur = s * d
    rng.shuffle(modes)
    shape, stride = tuple(m[0] for m in modes), tuple(m[1] for m in modes)
    lay = c.Layout(shape, stride) if len(modes) > 1 else c.Layout(shape[0], stride[0])
    return lay, cur * int(rng.integers(1, 5))


def check(mod, rng):
    c = cute()
    cases = [(c.Layout(4, 2), 24), (c.Layout((2, 2), (4, 1)), 16), (c.Layout((4, 2), (1, 16)), 64),
             (c.Layout((2, 4), (8, 1)), 32)] + [rand_case(rng) for _ in range(30)]
    for a, m in cases:
        got = mod.complement(a.shape, a.stride, m)
        same_function(f"complement({a}, {m})", got, c.complement(a, m), what="complement", ranks=False)
