"""Spec of algorithm/bwd_dS: dS against the reference, and dQ/dK from it against finite differences."""

import numpy as np
from grading import close, randn
from reference import backward, forward

CONCEPT = "softmax backward: dS = P ∘ (dP − D), the Jacobian diag(p) − p pᵀ applied row by row"
NEEDS_GPU = False


def check(mod, rng):
    for sq, sk, d, causal in ((4, 4, 3, False), (5, 7, 3, False), (6, 6, 4, True), (8, 3, 2, True)):
        q, k, v, do = randn(rng, sq, d), randn(rng, sk, d), randn(rng, sk, d), randn(rng, sq, d)
        ref = backward(q, k, v, do, 0.9, causal=causal)
        ds = mod.softmax_grad(ref["p"], ref["dp"], ref["D"])
        name = f"Nq {sq} Nk {sk}{' causal' if causal else ''}"
        close(name, ds, ref["ds"], rtol=1e-10, atol=1e-12, what="dS")
    # the meaning of dS: dL/dq through S = scale q k^T, checked by central differences
    sq, sk, d = 3, 5, 2
    q, k, v, do = randn(rng, sq, d), randn(rng, sk, d), randn(rng, sk, d), randn(rng, sq, d)
    ref = backward(q, k, v, do, 1.0)
    dq = np.asarray(mod.softmax_grad(ref["p"], ref["dp"], ref["D"]), dtype=np.float64) @ k
    num = np.zeros_like(q)
    for idx in np.ndindex(q.shape):
        h = 1e-6
        qp, qm = q.copy(), q.copy()
        qp[idx] += h
        qm[idx] -= h
        num[idx] = ((forward(qp, k, v, 1.0)["out"] - forward(qm, k, v, 1.0)["out"]) * do).sum() / (2 * h)
    close("dQ = dS K against finite differences of L = sum(dO ∘ O)", dq, num, rtol=1e-6, atol=1e-7, what="dQ")
