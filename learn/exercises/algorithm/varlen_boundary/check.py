"""Spec of algorithm/varlen_boundary: a packed sequence's tile rows, the boundary tile's P·V with
the next sequence's NaN next door, the dq_accum tiles that exist."""

import numpy as np
from grading import Fail, close, equal, randn

CONCEPT = "varlen: a tile past its sequence's end holds the next sequence's rows; zero them (0 * NaN = NaN)"
NEEDS_GPU = False


def check(mod, rng):
    lens = [5, 0, 13, 1, 8]
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    total = int(cu[-1]) + 3  # the caller packed 3 rows more than the sequences use
    block = 4
    for b, n in enumerate(lens):
        for j in range(-(-max(n, 1) // block) + 1):  # the sequence's tiles and one past it
            first = int(cu[b]) + j * block
            want = (first, max(0, min(block, total - first)), max(0, min(block, n - j * block)))
            got = tuple(int(x) for x in mod.tile_rows(cu, total, b, j, block))
            equal("tile_rows", got, want, what=f"sequence {b} (length {n}), tile {j}, block {block}")
    # The last sequence's last tile reaches past the tensor: the copy's zeros.
    equal("tile_rows", tuple(int(x) for x in mod.tile_rows(cu, 27, 4, 1, 8)), (27, 0, 0), what="a tile starting at the tensor's end")

    for valid, rows, blk, d in ((3, 2, 4, 5), (1, 3, 8, 2), (4, 2, 4, 3), (0, 2, 4, 3), (7, 4, 8, 4)):
        p = np.abs(randn(rng, rows, blk))
        p[:, valid:] = 0.0  # masked: the keys of the next sequence
        v = randn(rng, blk, d)
        v[valid:] = np.where(rng.random((blk - valid, d)) < 0.5, np.nan, np.inf)  # the neighbour diverged
        loaded = v.copy()
        got = mod.pv_tile(p, v, valid)
        close("pv_tile", got, p[:, :valid] @ loaded[:valid], rtol=1e-12, atol=1e-12,
              what=f"P·V, {valid} valid rows of {blk}, NaN / Inf in the rest")
        if not np.array_equal(np.isnan(v), np.isnan(loaded)) or not np.array_equal(v[:valid], loaded[:valid]):
            raise Fail("pv_tile", "the caller's v changed: pv_tile must zero a copy, not its argument")
    # finite neighbours: zeroing must not depend on the values being NaN
    p = np.abs(randn(rng, 2, 4))
    p[:, 2:] = 0.0
    v = randn(rng, 4, 3) * 1e300
    close("pv_tile", mod.pv_tile(p, v, 2), p[:, :2] @ v[:2], rtol=1e-12, atol=1e-12, what="huge finite neighbours")

    for lens, bm in (([5, 0, 13, 1, 8], 4), ([128, 129, 1], 128), ([0, 0], 64), ([300], 64)):
        want = [(b, m) for b, n in enumerate(lens) for m in range(-(-n // bm))]
        got = [tuple(int(x) for x in t) for t in mod.tiles_to_zero(lens, bm)]
        equal("tiles_to_zero", got, want, what=f"lengths {lens}, block_m {bm}")
    lens = [int(x) for x in rng.integers(0, 300, size=6)]
    padded = len(lens) * -(-max(lens) // 64)
    got = mod.tiles_to_zero(lens, 64)
    if len(got) > sum(-(-n // 64) for n in lens):
        raise Fail("tiles_to_zero", f"{len(got)} tiles for lengths {lens}: more than the sequences have "
                                    f"(padding every sequence to the longest gives {padded})")
