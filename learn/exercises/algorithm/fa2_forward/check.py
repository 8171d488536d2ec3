"""Spec of algorithm/fa2_forward: against the float64 dense reference, causal and not."""

from grading import close, randn
from reference import forward

CONCEPT = "FlashAttention-2 forward: Q blocks outer, state in registers, one final O / l, causal bottom-right"
NEEDS_GPU = False

SHAPES = ((1, 1, 2, 4, 4), (7, 13, 3, 4, 5), (16, 16, 4, 8, 8), (13, 5, 5, 3, 2), (9, 30, 2, 16, 7),
          (20, 11, 3, 6, 4))


def check(mod, rng):
    for causal in (False, True):
        for nq, nk, d, br, bc in SHAPES:
            q, k, v = randn(rng, nq, d), randn(rng, nk, d), randn(rng, nk, d)
            scale = 1.5 + rng.random()
            ref = forward(q, k, v, scale, causal=causal)
            out, lse = mod.fa2_forward(q, k, v, scale, causal, br, bc)
            name = f"{'causal' if causal else 'full'} Nq {nq} Nk {nk} d {d} Br {br} Bc {bc}"
            close(name, out, ref["out"], rtol=1e-10, atol=1e-12, what="out")
            close(name, lse, ref["lse"], rtol=1e-10, atol=1e-12, what="LSE")
