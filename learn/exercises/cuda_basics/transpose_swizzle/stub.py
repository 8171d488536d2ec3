"""Exercise cuda_basics/transpose_swizzle — conflict-free without padding: an XOR swizzle.

Padding (transpose_padded) wastes shared memory and breaks the alignment that vector and TMA
copies need. The alternative is to permute WHERE each element lives: store element (r, c) of the
tile at column c ^ r of a plain `float tile[32][32]`:

    tile[ty][tx ^ ty] = a[...]                    (a row write: the XOR permutes within the row)
    __syncthreads();
    ... = tile[tx][ty ^ tx]                       (element (tx, ty) lives at column ty ^ tx)

Reading the column ty of the logical tile, lane tx hits physical column ty ^ tx: all 32 lanes hit
different banks, 1-way. Same task as transpose_padded (out = a.T, blocks of (32, 32), grid
(ceil(cols/32), ceil(rows/32))), but the tile must be exactly (32, 32) float32 (4096 bytes of
shared memory), and the shared-memory accesses 1-way.
"""

import numpy as np  # noqa: F401


def transpose(ctx, a, out, rows, cols):
    raise NotImplementedError
