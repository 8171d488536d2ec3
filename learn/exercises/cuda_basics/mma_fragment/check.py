"""Spec of cuda_basics/mma_fragment: the PTX m16n8k16 C/D layout, per register, then gather."""

import numpy as np
from grading import Fail, equal

CONCEPT = "mma.m16n8k16 accumulator fragment: row = lane/4 (+8), col = 2*(lane%4) (+1), per 8-column tile"
NEEDS_GPU = False


def ptx(lane, r):
    """PTX ISA 'Matrix Fragments for mma.m16n8k16', C/D f32: c0..c3 of tile r // 4."""
    tile, i = divmod(r, 4)
    group, tig = lane >> 2, lane % 4
    row = group if i < 2 else group + 8
    return row, tile * 8 + tig * 2 + (i & 1)


def check(mod, rng):
    for lane in range(32):
        for r in range(16):
            got = mod.acc_coord(lane, r)
            if tuple(int(v) for v in got) != ptx(lane, r):
                raise Fail("acc_coord", f"lane {lane}, register {r}: got {tuple(got)}, expected {ptx(lane, r)}")
    for n_tiles in (1, 2, 4, int(rng.integers(3, 9))):
        name = f"gather, {n_tiles} tile(s)"
        frags = rng.standard_normal((32, 4 * n_tiles))
        exp = np.zeros((16, 8 * n_tiles))
        for lane in range(32):
            for r in range(4 * n_tiles):
                exp[ptx(lane, r)] = frags[lane, r]
        equal(name, np.asarray(mod.gather(frags.copy())), exp, what="accumulator")
