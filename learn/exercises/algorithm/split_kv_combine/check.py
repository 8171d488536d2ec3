"""Spec of algorithm/split_kv_combine: partials per chunk, the combine on them and on hard cases."""

import numpy as np
from grading import close, randn
from reference import forward

CONCEPT = "split-KV: per-chunk partial O and LSE, then the exact LSE-weighted merge (with the max subtracted)"
NEEDS_GPU = False


def check(mod, rng):
    for nq, nk, d, S in ((1, 10, 3, 3), (2, 7, 4, 4), (3, 5, 2, 4), (4, 16, 3, 2), (2, 3, 2, 5)):
        q, k, v = randn(rng, nq, d), randn(rng, nk, d), randn(rng, nk, d)
        scale = 0.5 + rng.random()
        name = f"Nq {nq} Nk {nk} d {d}, {S} splits"
        outs, lses = mod.split_partials(q, k, v, scale, S)
        outs, lses = np.asarray(outs, dtype=np.float64), np.asarray(lses, dtype=np.float64)
        c = -(-nk // S)
        for s in range(S):
            lo, hi = s * c, min((s + 1) * c, nk)
            if lo >= hi:
                eo, el = np.zeros((nq, d)), np.full(nq, -np.inf)
            else:
                r = forward(q, k[lo:hi], v[lo:hi], scale)
                eo, el = r["out"], r["lse"]
            close(f"{name}: partial {s} (keys [{lo}, {hi}))", outs[s], eo, rtol=1e-10, atol=1e-12, what="O_s")
            close(f"{name}: partial {s} (keys [{lo}, {hi}))", lses[s], el, rtol=1e-10, atol=1e-12, what="LSE_s")
        ref = forward(q, k, v, scale)
        out, lse = mod.combine(outs, lses)
        close(f"{name}: combined", out, ref["out"], rtol=1e-10, atol=1e-12, what="out")
        close(f"{name}: combined", lse, ref["lse"], rtol=1e-10, atol=1e-12, what="LSE")
    # synthetic partials: huge LSE values, empty partials, and a row with no partial at all
    S, nq, d = 4, 5, 3
    outs = randn(rng, S, nq, d)
    lses = randn(rng, S, nq, scale=3.0) + rng.choice([-1.0, 1.0]) * 1000.0
    lses[1, 0] = lses[3, 2] = -np.inf
    lses[:, 4] = -np.inf
    outs[lses == -np.inf] = 0.0
    m = lses.max(axis=0)
    m_ref = np.where(np.isfinite(m), m, 0.0)
    w = np.exp(lses - m_ref)
    z = w.sum(axis=0)
    exp_lse = np.where(z > 0, m_ref + np.log(np.where(z > 0, z, 1.0)), -np.inf)
    exp_out = (w[:, :, None] * outs).sum(axis=0) / np.where(z > 0, z, 1.0)[:, None]
    out, lse = mod.combine(outs.copy(), lses.copy())
    name = "LSE ~ 1000 (exp overflows), empty partials, one row with every partial empty"
    close(name, lse, exp_lse, rtol=1e-12, atol=1e-12, what="LSE")
    close(name, out, exp_out, rtol=1e-10, atol=1e-12, what="out")
