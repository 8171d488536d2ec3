"""Spec of algorithm/fully_masked_rows: states from causal bottom-right problems with empty rows."""

import numpy as np
from grading import close, randn
from reference import forward

CONCEPT = "finalize O / l and LSE = m + log l; a fully masked row gives O = 0, LSE = -inf, no NaN"
NEEDS_GPU = False


def check(mod, rng):
    for sq, sk, d in ((6, 3, 4), (9, 2, 3), (5, 5, 2), (4, 7, 5)):
        q, k, v = randn(rng, sq, d), randn(rng, sk, d), randn(rng, sk, d)
        ref = forward(q, k, v, 0.7, causal=True)
        s = ref["s"]
        m = s.max(axis=1)
        m_ref = np.where(np.isfinite(m), m, 0.0)
        e = np.exp(s - m_ref[:, None])
        out, lse = mod.finalize(m, e.sum(axis=1), e @ v)
        name = f"causal bottom-right sq {sq} sk {sk} ({max(0, sq - sk)} empty rows)"
        close(name, out, ref["out"], rtol=1e-12, atol=1e-12, what="out")
        close(name, lse, ref["lse"], rtol=1e-12, atol=1e-12, what="LSE")
