"""Spec of algorithm/online_softmax: states after each block against the direct definitions."""

import numpy as np
from grading import close, randn

CONCEPT = "online softmax update: running max m, sum l, unnormalized O, the exp(m_old - m_new) rescale"
NEEDS_GPU = False


def direct_state(S_seen, V_seen):
    """m, l, O over the keys seen so far, from the definitions (no update formula)."""
    m = S_seen.max(axis=1) if S_seen.shape[1] else np.full(len(S_seen), -np.inf)
    m_ref = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(S_seen - m_ref[:, None])
    return m, e.sum(axis=1), e @ V_seen


def check(mod, rng):
    for rows, d, blocks in ((4, 3, (2, 5, 3, 1)), (7, 2, (8, 8, 8)), (3, 5, (1, 1, 4, 2, 3))):
        nk = sum(blocks)
        # scores that grow from block to block, so the max moves and the rescale matters
        S = randn(rng, rows, nk, scale=2.0) + np.linspace(0, 12, nk)[None, :]
        S[0, : blocks[0] + blocks[1]] = -np.inf          # row 0: the first two blocks fully masked
        S[1, :] = -np.inf                                 # row 1: never sees a key
        S[2, rng.random(nk) < 0.3] = -np.inf
        V = randn(rng, nk, d)
        m, l, O = np.full(rows, -np.inf), np.zeros(rows), np.zeros((rows, d))
        start = 0
        for t, bc in enumerate(blocks):
            blk = slice(start, start + bc)
            m, l, O = mod.online_update(m.copy(), l.copy(), O.copy(), S[:, blk].copy(), V[blk].copy())
            start += bc
            em, el, eO = direct_state(S[:, :start], V[:start])
            name = f"rows {rows}, d {d}, blocks {blocks}: state after block {t}"
            close(name, m, em, rtol=1e-12, atol=0, what="m")
            close(name, l, el, rtol=1e-10, atol=0, what="l")
            close(name, O, eO, rtol=1e-10, atol=1e-12, what="O")
