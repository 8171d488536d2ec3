"""Helpers of the cuda_basics checks: launch on the simulator, and the ideal sector counts."""

import numpy as np
from grading import Fail, equal, randn

from cuda_basics import sim


def launch(check, kernel, grid, block, *args):
    """sim.launch, with a simulator error (race, out of bounds, ...) reported as a failed check."""
    try:
        return sim.launch(kernel, grid, block, *args)
    except sim.SimError as e:
        raise Fail(check, f"simulator: {e}")


def threads(grid, block):
    """Every thread of a launch as arrays: bx, by, tx, ty, tid and warp (a launch-wide warp id)."""
    (gx, gy), (bx_, by_) = grid, block
    bid, tid = np.meshgrid(np.arange(gx * gy), np.arange(bx_ * by_), indexing="ij")
    bid, tid = bid.ravel(), tid.ravel()
    warps_per_block = -(-bx_ * by_ // 32)
    return dict(bx=bid % gx, by=bid // gx, tx=tid % bx_, ty=tid // bx_, tid=tid,
                warp=bid * warps_per_block + tid // 32)


def sectors(keys, flat, itemsize):
    """32-byte sectors touched when the accesses flat[i] are grouped in instructions by keys[i]."""
    keys, flat = np.asarray(keys, np.int64), np.asarray(flat, np.int64)
    return len(np.unique(np.stack([keys, flat * itemsize // 32]), axis=1).T) if keys.size else 0


def at_most(check, got, ideal, what):
    if got > ideal:
        raise Fail(check, f"{what}: {got} global-memory sectors, a coalesced kernel touches {ideal} "
                          f"({got / ideal:.1f}x): consecutive threads (threadIdx.x) should touch "
                          "consecutive addresses")


def _transpose_ideal(rows, cols):
    """Sectors of the coalesced reads of a and writes of out (one warp = one row of a tile)."""
    t = threads((-(-cols // 32), -(-rows // 32)), (32, 32))
    r, c = t["by"] * 32 + t["ty"], t["bx"] * 32 + t["tx"]
    ok = (r < rows) & (c < cols)
    rd = sectors(t["warp"][ok], (r * cols + c)[ok], 4)
    r, c = t["bx"] * 32 + t["ty"], t["by"] * 32 + t["tx"]
    ok = (r < cols) & (c < rows)
    return rd, sectors(t["warp"][ok], (r * rows + c)[ok], 4)


def run_transpose(mod, rng, rows, cols):
    name = f"{rows} x {cols}"
    a = randn(rng, rows, cols).astype(np.float32)
    out = np.full((cols, rows), np.nan, np.float32)
    st = launch(name, mod.transpose, (-(-cols // 32), -(-rows // 32)), (32, 32), a, out, rows, cols)
    equal(name, out, a.T, what="out")
    rd, wr = _transpose_ideal(rows, cols)
    at_most(name, st.sectors("load", "a"), rd, "reads of a")
    at_most(name, st.sectors("store", "out"), wr, "writes of out")
    if st.max_way() == 0:
        raise Fail(name, "no shared memory used: stage the tile in ctx.shared")
    return name, st
