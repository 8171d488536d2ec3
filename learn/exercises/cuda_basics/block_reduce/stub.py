"""Exercise cuda_basics/block_reduce — a block-wide sum in shared memory with __syncthreads().

Each block of B threads (B a power of two) sums B consecutive elements of x into partial[blockIdx.x]:

    __shared__ double s[B];
    int t = threadIdx.x, i = blockIdx.x * B + t;
    s[t] = i < n ? x[i] : 0;                      // threads past n contribute 0 (never garbage)
    __syncthreads();
    for (int k = B / 2; k > 0; k /= 2) {          // tree: B/2 adds, then B/4, ..., 1
        if (t < k) s[t] += s[t + k];
        __syncthreads();                          // the next round reads what this round wrote
    }
    if (t == 0) partial[blockIdx.x] = s[0];

Write `block_sum(ctx, x, partial, n)` (float64; B = blockDim.x). The simulator reports a RACE when
two threads touch the same shared address between two barriers and one of them writes it.
"""

import numpy as np  # noqa: F401  (ctx.shared("s", (ctx.blockDim.x,), np.float64))


def block_sum(ctx, x, partial, n):
    raise NotImplementedError
