"""Mutant: The mask alone: P·V over the whole tile, the neighbour rows as loaded (0 * NaN = NaN)."""

import numpy as np


def tile_rows(cu, total, b, j, block):
    first = int(cu[b]) + j * block
    loaded = max(0, min(block, total - first))
    valid = max(0, min(block, int(cu[b + 1]) - first))
    return first, loaded, valid


def pv_tile(p, v, valid):
    v = np.array(v, dtype=np.float64)  # a copy: the caller's tile stays as loaded
    return np.asarray(p, dtype=np.float64) @ v


def tiles_to_zero(lens, block_m):
    return [(b, m) for b, n in enumerate(lens) for m in range(-(-n // block_m))]
