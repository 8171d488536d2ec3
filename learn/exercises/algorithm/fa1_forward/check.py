"""Spec of algorithm/fa1_forward: against the float64 dense reference on awkward shapes."""

from grading import close, randn
from reference import forward

CONCEPT = "FlashAttention-1 forward: KV blocks outer, Q blocks inner, normalized O / l / m in HBM"
NEEDS_GPU = False

# (Nq, Nk, d, Br, Bc): partial last blocks, Nq != Nk both ways, single-row and single-key blocks
SHAPES = ((1, 1, 2, 4, 4), (7, 13, 3, 4, 5), (16, 16, 4, 8, 8), (13, 5, 5, 3, 2), (9, 30, 2, 16, 7))


def check(mod, rng):
    for nq, nk, d, br, bc in SHAPES:
        q, k, v = randn(rng, nq, d), randn(rng, nk, d), randn(rng, nk, d)
        scale = 1.5 + rng.random()  # a large scale: the running max moves a lot between blocks
        ref = forward(q, k, v, scale)
        out, lse = mod.fa1_forward(q, k, v, scale, br, bc)
        name = f"Nq {nq} Nk {nk} d {d} Br {br} Bc {bc}"
        close(name, out, ref["out"], rtol=1e-10, atol=1e-12, what="out")
        close(name, lse, ref["lse"], rtol=1e-10, atol=1e-12, what="LSE")
