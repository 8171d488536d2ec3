"""Float64 reference for the exercises: dense softmax attention with the interval masks.

Same semantics as flashlab (docs/algorithm.md, sections 1, 5-7; python/tests/attention_reference.py):
s = scale * q.k, then softcap, then the interval mask; LSE in natural log; a row that sees no key
gives O = 0, LSE = -inf and zero gradients. One (batch, head) problem: q (Nq, d), k and v (Nk, d).
The checkers compare the learner's code against these functions; the exercises never import it.
"""

import numpy as np


def interval(i, seqlen_q, seqlen_k, causal=False, align="bottom_right", left=-1, right=-1):
    """The visible keys [lo, hi] of query row i (empty when hi < lo). -1 means unbounded."""
    shift = seqlen_k - seqlen_q if align == "bottom_right" else 0
    if causal:
        right = 0
    lo = 0 if left < 0 else max(0, i + shift - left)
    hi = seqlen_k - 1 if right < 0 else min(seqlen_k - 1, i + shift + right)
    return lo, hi


def visible(seqlen_q, seqlen_k, causal=False, align="bottom_right", left=-1, right=-1):
    """(Nq, Nk) bool: True where query i sees key j."""
    keep = np.zeros((seqlen_q, seqlen_k), dtype=bool)
    for i in range(seqlen_q):
        lo, hi = interval(i, seqlen_q, seqlen_k, causal, align, left, right)
        if hi >= lo:
            keep[i, lo:hi + 1] = True
    return keep


def lse(s):
    """Row-wise log-sum-exp of s (..., n) in float64; -inf for rows with no finite entry."""
    s = np.asarray(s, dtype=np.float64)
    m = s.max(axis=-1, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    z = np.exp(s - m_safe).sum(axis=-1)
    with np.errstate(divide="ignore"):
        return np.where(z > 0, np.log(z) + m_safe[..., 0], -np.inf)


def scores(q, k, scale, causal=False, align="bottom_right", left=-1, right=-1, softcap=0.0):
    """S (Nq, Nk) in float64 with softcap and the mask applied (-inf where masked)."""
    q, k = (np.asarray(x, dtype=np.float64) for x in (q, k))
    s = scale * q @ k.T
    if softcap > 0:
        s = softcap * np.tanh(s / softcap)
    return np.where(visible(len(q), len(k), causal, align, left, right), s, -np.inf)


def forward(q, k, v, scale, causal=False, align="bottom_right", left=-1, right=-1, softcap=0.0):
    """Dense attention. Returns dict(out (Nq, d), lse (Nq,), p (Nq, Nk), s (Nq, Nk))."""
    s = scores(q, k, scale, causal, align, left, right, softcap)
    row_lse = lse(s)
    finite = np.isfinite(row_lse)[:, None]
    p = np.where(finite, np.exp(s - np.where(finite, row_lse[:, None], 0.0)), 0.0)
    out = p @ np.asarray(v, dtype=np.float64)
    return {"out": out, "lse": row_lse, "p": p, "s": s}


def backward(q, k, v, dout, scale, causal=False, align="bottom_right", left=-1, right=-1):
    """Dense backward (no softcap). Returns dict(D, dp, ds, dq, dk, dv) plus the forward's entries."""
    f = forward(q, k, v, scale, causal, align, left, right)
    q, k, v, dout = (np.asarray(x, dtype=np.float64) for x in (q, k, v, dout))
    p = f["p"]
    dp = dout @ v.T
    D = (dout * f["out"]).sum(axis=-1)
    ds = p * (dp - D[:, None])
    f.update(D=D, dp=dp, ds=ds, dq=scale * ds @ k, dk=scale * ds.T @ q, dv=p.T @ dout)
    return f
