"""Exercise cuda_basics/stencil2d — a 5-point stencil with a halo tile in shared memory.

out[r, c] = 4 a[r, c] - a[r-1, c] - a[r+1, c] - a[r, c-1] - a[r, c+1], where a is 0 outside the
(H, W) float32 matrix. Each input is needed by 5 outputs; instead of 5 global reads per thread, a
block of (16, 16) threads loads its 16 x 16 tile PLUS a one-element HALO on each side into a
shared (18, 18) tile, __syncthreads(), then computes from shared memory:

    s[ty+1][tx+1] = a(r, c)                          every thread, its own element
    tx == 0:  s[ty+1][0]  = a(r, c-1)               the left halo column (and right: tx == 15,
    ty == 0:  s[0][tx+1]  = a(r-1, c)               top: ty == 0, bottom: ty == 15)
    __syncthreads();
    if (r < H && c < W) out[r][c] = 4 s[ty+1][tx+1] - s[ty][tx+1] - s[ty+2][tx+1] - ...

with r = blockIdx.y * 16 + ty, c = blockIdx.x * 16 + tx, and a(r, c) = 0 outside the matrix
(read only inside it). Threads outside the matrix still load the halo and reach the barrier: no
early return. Write `stencil(ctx, a, out, H, W)` (grid (ceil(W/16), ceil(H/16))). Graded on values
and on the sectors read from a (at most 3x those of reading each element once).
"""

import numpy as np  # noqa: F401  (ctx.shared("s", (18, 18), np.float32))


def stencil(ctx, a, out, H, W):
    raise NotImplementedError
