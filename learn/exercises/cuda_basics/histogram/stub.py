"""Exercise cuda_basics/histogram — atomics, with a per-block histogram in shared memory.

hist[b] = the number of i < n with v[i] == b (v: int32 in [0, bins); hist: int64, zeroed by the
caller). `hist[v[i]] += 1` by many threads at once loses updates (two threads read the same old
count); atomicAdd makes the read-modify-write indivisible. Contention is lower in shared memory, so:

    __shared__ int h[bins];
    for (int b = threadIdx.x; b < bins; b += blockDim.x) h[b] = 0;      // zero it (it is garbage)
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&h[v[i]], 1);
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += blockDim.x) atomicAdd(&hist[b], h[b]);

Write `histogram(ctx, v, hist, n, bins)`; use `yield ctx.atomic_add(array, index, value)` and
ctx.shared("h", (bins,), np.int64). Bins may outnumber the threads of a block.
"""

import numpy as np  # noqa: F401


def histogram(ctx, v, hist, n, bins):
    raise NotImplementedError
