"""Spec of algorithm/sink_tokens: against a brute-force scan of the dense mask with sink tokens."""

import numpy as np

from grading import equal
from reference import visible

CONCEPT = "StreamingLLM sink tokens: a second visible range [0, s_i) left of the window, and the key blocks it adds"
NEEDS_GPU = False


def dense(sq, sk, causal, left, n):
    """(Nq, Nk) bool, straight from the definition: the window, plus keys j < n with j <= hi_i."""
    keep = visible(sq, sk, causal=causal, left=left)
    shift = sk - sq
    for i in range(sq):
        hi = min(sk - 1, i + shift) if causal else sk - 1
        keep[i, :max(0, min(n, hi + 1))] = True
    return keep


def brute_blocks(b, br, bc, keep):
    rows = keep[b * br:(b + 1) * br]
    return [j for j in range(-(-keep.shape[1] // bc)) if rows[:, j * bc:(j + 1) * bc].any()]


def check(mod, rng):
    # (Nq, Nk, Br, Bc, causal, window_left, sink_tokens)
    cases = [(16, 16, 4, 4, True, 3, 2), (16, 16, 4, 4, True, 3, 6),   # sinks inside / past block 0
             (12, 20, 4, 8, True, 2, 3), (20, 7, 4, 3, True, 1, 2),    # Nq > Nk: rows with no key
             (32, 32, 8, 4, True, 6, 9), (17, 17, 4, 4, False, 5, 4),  # non-causal window
             (30, 25, 6, 5, True, 12, 4),                              # the window reaches the sinks
             (16, 16, 4, 4, True, -1, 4), (16, 16, 4, 4, True, 3, 0)]  # no window; no sinks
    sq, sk = (int(x) for x in rng.integers(5, 40, size=2))
    cases.append((sq, sk, int(rng.integers(2, 9)), int(rng.integers(2, 9)), bool(rng.integers(0, 2)),
                  int(rng.integers(-1, 8)), int(rng.integers(0, 12))))
    for sq, sk, br, bc, causal, left, n in cases:
        keep = dense(sq, sk, causal, left, n)
        setup = f"Nq {sq} Nk {sk}{' causal' if causal else ''} left {left} sink_tokens {n}"
        # s_i from the dense mask: keys left of the row's window that it still sees
        for i in range(sq):
            lo = 0 if left < 0 else max(0, i + sk - sq - left)
            exp = int(np.count_nonzero(keep[i, :lo]))
            equal(f"{setup}, row {i}", int(mod.sink_keys(i, sq, sk, causal, left, n)), exp, what="s_i")
        for b in range(-(-sq // br)):
            got = [int(x) for x in mod.key_blocks(b, br, bc, sq, sk, causal, left, n)]
            equal(f"{setup}, Br {br} Bc {bc}, query block {b}", got, brute_blocks(b, br, bc, keep),
                  what="visited key blocks")
