"""Mutant: the old output is weighted by l_i but not by exp(m_i - m') when the max moves."""

import numpy as np


def fa1_forward(q, k, v, scale, block_q, block_k):
    nq, nk = len(q), len(k)
    O = np.zeros((nq, v.shape[1]))  # "HBM"
    l = np.zeros(nq)
    m = np.full(nq, -np.inf)
    for j0 in range(0, nk, block_k):
        kj, vj = k[j0:j0 + block_k], v[j0:j0 + block_k]
        for i0 in range(0, nq, block_q):
            rows = slice(i0, i0 + block_q)
            Oi, li, mi = O[rows], l[rows], m[rows]  # read from HBM
            S = scale * q[rows] @ kj.T
            mt = S.max(axis=1)
            Pt = np.exp(S - mt[:, None])
            lt = Pt.sum(axis=1)
            mn = np.maximum(mi, mt)
            a, b = np.exp(mi - mn), np.exp(mt - mn)
            ln = a * li + b * lt
            O[rows] = (li[:, None] * Oi + b[:, None] * (Pt @ vj)) / ln[:, None]  # write back
            l[rows], m[rows] = ln, mn
    return O, m + np.log(l)
