"""Spec of algorithm/softcap: forward against tanh, backward against finite differences and the
full softcapped attention gradient."""

import numpy as np
from grading import close, randn
from reference import forward

CONCEPT = "softcap: s = c·tanh(u/c) and its derivative 1 − (s/c)² in the backward"
NEEDS_GPU = False


def check(mod, rng):
    for cap in (2.0, 30.0, 0.5 + rng.random()):
        u = randn(rng, 4, 6, scale=cap * 1.5)
        u[0, 0] = 40.0 * cap  # saturated
        close(f"forward, cap {cap:.3g}", mod.softcap(u, cap), cap * np.tanh(u / cap), rtol=1e-12, atol=1e-12,
              what="s")
        ds = randn(rng, 4, 6)
        s_cap = cap * np.tanh(u / cap)
        h = 1e-6 * cap
        fd = ds * (cap * np.tanh((u + h) / cap) - cap * np.tanh((u - h) / cap)) / (2 * h)
        close(f"backward against finite differences, cap {cap:.3g}", mod.softcap_backward(ds, s_cap, cap), fd,
              rtol=1e-6, atol=1e-8, what="dU")
    # the whole chain: dL/dq of softcapped attention, dL = sum(dO ∘ O), by central differences
    sq, sk, d, cap, scale = 3, 4, 2, 1.5, 1.3
    q, k, v, do = randn(rng, sq, d, scale=2.0), randn(rng, sk, d), randn(rng, sk, d), randn(rng, sq, d)
    f = forward(q, k, v, scale, softcap=cap)
    p = f["p"]
    dp = do @ v.T
    dS = p * (dp - (do * f["out"]).sum(axis=1, keepdims=True))
    s_cap = np.asarray(mod.softcap(scale * q @ k.T, cap), dtype=np.float64)
    dq = scale * np.asarray(mod.softcap_backward(dS, s_cap, cap), dtype=np.float64) @ k
    num = np.zeros_like(q)
    for idx in np.ndindex(q.shape):
        qp, qm = q.copy(), q.copy()
        qp[idx] += 1e-6
        qm[idx] -= 1e-6
        num[idx] = ((forward(qp, k, v, scale, softcap=cap)["out"] - forward(qm, k, v, scale, softcap=cap)["out"])
                    * do).sum() / 2e-6
    close("dQ of softcapped attention against finite differences", dq, num, rtol=1e-6, atol=1e-7, what="dQ")
