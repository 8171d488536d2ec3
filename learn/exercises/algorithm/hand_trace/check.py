"""Spec of algorithm/hand_trace: the tiny case of the docstring, then random shapes."""

import numpy as np
from grading import Fail, close, randn

CONCEPT = "hand trace of the online softmax: m, l, O after each key block (seq 4, d 2, block 2)"
NEEDS_GPU = False

TINY = (np.array([[1, 0], [0, 1], [1, 1], [-1, 1]], dtype=np.float64),
        np.array([[1, 0], [0, 1], [1, 1], [2, 0]], dtype=np.float64),
        np.array([[1, 2], [3, 4], [5, 6], [7, 8]], dtype=np.float64))


def expected(q, k, v, scale, block):
    """The states from their definitions over the keys seen so far."""
    s = scale * q @ k.T
    out = []
    for end in range(block, len(k) + block, block):
        seen = s[:, :min(end, len(k))]
        m = seen.max(axis=1)
        e = np.exp(seen - m[:, None])
        out.append((m, e.sum(axis=1), e @ v[:seen.shape[1]]))
    return out


def compare(name, got, exp):
    got = list(got)
    if len(got) != len(exp):
        raise Fail(name, f"{len(got)} states, expected {len(exp)} (one per key block, after the block)")
    for t, (g, e) in enumerate(zip(got, exp)):
        if len(g) != 3:
            raise Fail(name, f"state {t}: expected a tuple (m, l, O)")
        for what, gv, ev in zip(("m", "l", "O"), g, e):
            close(f"{name}, after key block {t}", gv, ev, rtol=1e-9, atol=1e-12, what=what)


def check(mod, rng):
    compare("tiny case (seq 4, d 2, block 2, scale 1)", mod.trace(*(x.copy() for x in TINY), 1.0, 2),
            expected(*TINY, 1.0, 2))
    for nq, nk, d, block in ((4, 4, 2, 2), (5, 7, 3, 3), (3, 9, 2, 4), (6, 2, 2, 1)):
        q, k, v = randn(rng, nq, d), randn(rng, nk, d), randn(rng, nk, d)
        scale = 1.0 + rng.random()
        compare(f"random Nq {nq} Nk {nk} d {d} block {block}", mod.trace(q, k, v, scale, block),
                expected(q, k, v, scale, block))
