"""Mutant: The sequence's valid rows taken from the tensor's end, as if TMA zero-filled past each sequence."""

import numpy as np


def tile_rows(cu, total, b, j, block):
    first = int(cu[b]) + j * block
    loaded = max(0, min(block, total - first))
    valid = max(0, min(block, total - first))
    return first, loaded, valid


def pv_tile(p, v, valid):
    v = np.array(v, dtype=np.float64)  # a copy: the caller's tile stays as loaded
    v[valid:] = 0.0  # the next sequence's rows: 0 * NaN would be NaN
    return np.asarray(p, dtype=np.float64) @ v


def tiles_to_zero(lens, block_m):
    return [(b, m) for b, n in enumerate(lens) for m in range(-(-n // block_m))]
