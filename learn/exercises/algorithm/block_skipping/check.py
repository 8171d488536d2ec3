"""Spec of algorithm/block_skipping: against a brute-force scan of the dense mask."""

from grading import equal
from reference import visible

CONCEPT = "block skipping: the key blocks a query block visits, and the boundary blocks that need a mask"
NEEDS_GPU = False


def brute(b, br, bc, sq, sk, causal, left):
    keep = visible(sq, sk, causal=causal, left=left)[b * br:(b + 1) * br]
    visit, masked = [], []
    for j in range(0, -(-sk // bc)):
        tile = keep[:, j * bc:(j + 1) * bc]
        if tile.any():
            visit.append(j)
            if not tile.all():
                masked.append(j)
    return visit, masked


def check(mod, rng):
    cases = [(16, 16, 4, 4, True, -1), (16, 16, 8, 4, True, -1), (12, 20, 4, 8, True, -1),
             (20, 7, 4, 3, True, -1), (16, 16, 4, 4, False, -1), (32, 32, 8, 4, True, 6),
             (30, 25, 6, 5, True, 3), (17, 17, 4, 4, False, 5)]
    sq, sk = (int(x) for x in rng.integers(5, 40, size=2))
    cases.append((sq, sk, int(rng.integers(2, 9)), int(rng.integers(2, 9)), True, int(rng.integers(-1, 6))))
    for sq, sk, br, bc, causal, left in cases:
        for b in range(-(-sq // br)):
            got = mod.key_blocks(b, br, bc, sq, sk, causal, left)
            exp = brute(b, br, bc, sq, sk, causal, left)
            name = f"Nq {sq} Nk {sk} Br {br} Bc {bc}{' causal' if causal else ''} left {left}, query block {b}"
            equal(name, [int(x) for x in got[0]], exp[0], what="visit")
            equal(name, [int(x) for x in got[1]], exp[1], what="masked")
