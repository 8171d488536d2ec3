"""Spec of algorithm/bwd_recompute_P: P against the reference's softmax, causal with empty rows."""

from grading import close, randn
from reference import forward

CONCEPT = "backward recomputation: P = exp(S − LSE) from the stored LSE; masked -> 0, empty rows -> 0"
NEEDS_GPU = False


def check(mod, rng):
    for sq, sk, d, causal in ((5, 7, 3, False), (6, 6, 4, True), (8, 3, 2, True), (1, 4, 3, True)):
        q, k, v = randn(rng, sq, d), randn(rng, sk, d), randn(rng, sk, d)
        scale = 0.5 + rng.random()
        ref = forward(q, k, v, scale, causal=causal)
        name = f"Nq {sq} Nk {sk}{' causal' if causal else ''}"
        close(name, mod.recompute_p(q, k, ref["lse"], scale, causal), ref["p"], rtol=1e-10, atol=1e-13, what="P")
