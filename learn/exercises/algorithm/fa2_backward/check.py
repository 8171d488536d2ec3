"""Spec of algorithm/fa2_backward: dQ, dK, dV against the float64 dense backward."""

from grading import close, randn
from reference import backward

CONCEPT = "tiled backward: KV outer, P recomputed from LSE, D, dS, dK/dV per key block, dQ accumulated"
NEEDS_GPU = False

SHAPES = ((1, 1, 2, 4, 4), (7, 13, 3, 4, 5), (13, 5, 5, 3, 2), (9, 9, 4, 4, 3), (20, 11, 3, 6, 4))


def check(mod, rng):
    for causal in (False, True):
        for nq, nk, d, br, bc in SHAPES:
            q, k, v, do = randn(rng, nq, d), randn(rng, nk, d), randn(rng, nk, d), randn(rng, nq, d)
            scale = 0.5 + rng.random()
            ref = backward(q, k, v, do, scale, causal=causal)
            dq, dk, dv = mod.fa2_backward(q, k, v, ref["out"].copy(), ref["lse"].copy(), do, scale, causal, br, bc)
            name = f"{'causal' if causal else 'full'} Nq {nq} Nk {nk} d {d} Br {br} Bc {bc}"
            for what, got in (("dq", dq), ("dk", dk), ("dv", dv)):
                close(name, got, ref[what], rtol=1e-10, atol=1e-12, what=what)
