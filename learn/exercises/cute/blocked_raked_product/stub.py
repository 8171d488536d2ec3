"""Exercise cute/blocked_raked_product — two ways to lay copies of a 2-D tile on a grid.

Both take a tile A of shape (a0, a1) and a grid B of shape (b0, b1) and build an (a0 * b0, a1 * b1)
layout whose values are those of logical_product: A(i) + size(A) * B(j) (A compact). They differ
in which coordinates are which:
  * blocked_product: mode 0 = (a0, b0): row r is element r % a0 of tile row r // a0. Each tile is a
    contiguous block. tile_to_shape(SmemLayoutAtom, (kBlockM, kHeadDim)) in flashlab is this.
  * raked_product:   mode 0 = (b0, a0): row r is element r // b0 of tile row r % b0. Tiles are
    interleaved ("raked"): neighbouring rows belong to different tiles (a thread layout that
    spreads one thread's values across the tile).
Same for the columns with a1, b1. Example (CuTe docs): A = (2, 5):(5, 1), B = (3, 4):(1, 3):
blocked = ((2, 3), (5, 4)):((5, 10), (1, 30)), raked = ((3, 2), (4, 5)):((10, 5), (30, 1)).

Write blocked(a, b) and raked(a, b) -> int arrays of shape (a0 * b0, a1 * b1), entry [r, c] = the
offset of row r, column c. a = ((a0, a1), strides) compact; b = ((b0, b1), strides) compact. No pycute.
"""

import numpy as np  # noqa: F401


def blocked(a, b):
    raise NotImplementedError


def raked(a, b):
    raise NotImplementedError
