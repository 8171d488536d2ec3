"""Spec of algorithm/bwd_preprocess_D: D against rowsum(P ∘ dP) of the float64 reference."""

from grading import close, randn
from reference import backward

CONCEPT = "backward preprocessing: D = rowsum(dO ∘ O) equals rowsum(P ∘ dP) without P"
NEEDS_GPU = False


def check(mod, rng):
    for sq, sk, d, causal in ((5, 7, 3, False), (8, 4, 6, True), (1, 1, 2, False), (9, 9, 5, True)):
        q, k, v, do = randn(rng, sq, d), randn(rng, sk, d), randn(rng, sk, d), randn(rng, sq, d)
        ref = backward(q, k, v, do, 0.8, causal=causal)
        exact = (ref["p"] * ref["dp"]).sum(axis=1)  # the definition, through the whole row of P
        close(f"Nq {sq} Nk {sk} d {d}{' causal' if causal else ''}", mod.preprocess_D(ref["out"], do),
              exact, rtol=1e-10, atol=1e-12, what="D")
