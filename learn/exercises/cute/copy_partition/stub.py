"""Exercise cute/copy_partition — which elements a thread copies (make_tiled_copy + partition_S).

flashlab copies a (kBlockM, kHeadDim) tile of Q from global memory with 16-byte cp.async: each
thread moves vec = 8 contiguous bf16 per instruction. The threads form a (tm, tn) thread layout,
row-major (thread t at thread-row t / tn, thread-col t % tn: GmemLayoutAtom), and the copy atom's
value layout is (1, 8). One pass of all threads covers a (tm, tn * vec) block; the tile is that
block repeated (M / tm) x (N / (tn * vec)) times (the CPY_M and CPY_N modes of partition_S).

For thread t, value v (0..vec-1) and repetition (i, j), the element is
    row = t / tn + tm * i,   col = (t % tn) * vec + v + tn * vec * j.

Write partition(t, tile, thr, vec) -> int array of shape (vec, M // tm, N // (tn * vec)) holding
the row-major offsets row * N + col. tile = (M, N), thr = (tm, tn). No pycute.
"""

import numpy as np  # noqa: F401


def partition(t, tile, thr, vec):
    raise NotImplementedError
