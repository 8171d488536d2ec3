"""Mutant: a row whose partials are all -inf: -inf - (-inf) = NaN (no guard on the max)."""

import numpy as np


def split_partials(q, k, v, scale, num_splits):
    nq, nk, d = len(q), len(k), v.shape[1]
    c = -(-nk // num_splits)
    outs, lses = np.zeros((num_splits, nq, d)), np.full((num_splits, nq), -np.inf)
    for s in range(num_splits):
        lo, hi = s * c, min((s + 1) * c, nk)
        if lo >= hi:
            continue
        S = scale * q @ k[lo:hi].T
        m = S.max(axis=1, keepdims=True)
        e = np.exp(S - m)
        z = e.sum(axis=1, keepdims=True)
        outs[s] = (e / z) @ v[lo:hi]
        lses[s] = (m + np.log(z))[:, 0]
    return outs, lses


def combine(outs, lses):
    outs, lses = np.asarray(outs, dtype=np.float64), np.asarray(lses, dtype=np.float64)
    m = lses.max(axis=0)
    m_ref = m
    w = np.exp(lses - m_ref)  # (S, Nq); 0 for empty partials
    z = w.sum(axis=0)
    empty = z == 0
    lse = np.where(empty, -np.inf, m_ref + np.log(np.where(empty, 1.0, z)))
    out = (w[:, :, None] * outs).sum(axis=0) / np.where(empty, 1.0, z)[:, None]
    return out, lse
