"""Spec of cute/composition: the same function as pycute's composition(A, B), with B's modes."""

from cute.common import cute, pow2, rand_compact, same_function

CONCEPT = "composition R = A o B: R(i) = A(B(i)), R has B's shape; how CuTe reshapes and tiles"
NEEDS_GPU = False


def rand_case(rng):
    c = cute()
    a = rand_compact(rng, [pow2(rng, 1, 3) for _ in range(int(rng.integers(2, 4)))])
    st = list(c.flatten(a.stride))
    if rng.integers(2):
        st[int(rng.integers(len(st)))] *= 2
    a = c.Layout(a.shape, tuple(st))
    while True:
        rank = int(rng.integers(1, 3))
        bs = tuple(pow2(rng, 1, 2) for _ in range(rank))
        bd = tuple(pow2(rng, 0, 3) for _ in range(rank))
        b = c.Layout(bs[0], bd[0]) if rank == 1 else c.Layout(bs, bd)
        try:
            return a, b, c.composition(a, b)
        except AssertionError:
            continue


def check(mod, rng):
    c = cute()
    fixed = [(c.Layout((6, 2), (8, 2)), c.Layout((4, 3), (3, 1))),
             (c.Layout((4, 8), (8, 1)), c.Layout(8, 4)), (c.Layout((4, 8), (1, 4)), c.Layout((2, 4), (16, 1)))]
    cases = [(a, b, c.composition(a, b)) for a, b in fixed] + [rand_case(rng) for _ in range(30)]
    for a, b, r in cases:
        got = mod.compose((a.shape, a.stride), (b.shape, b.stride))
        same_function(f"A = {a}, B = {b}", got, r, what="A o B")
