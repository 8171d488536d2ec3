"""Exercise cuda_basics/index_1d — the global index of a thread in a 1-D grid.

Read learn/exercises/cuda_basics/sim.py first: a kernel here is a Python GENERATOR run once per
thread by a small simulator, and every memory access is yielded (`yield ctx.store(out, i, v)`).

Thread threadIdx.x of block blockIdx.x (blocks of blockDim.x threads) has the global index

    i = blockIdx.x * blockDim.x + threadIdx.x

The grid is rounded up, gridDim.x = ceil(n / blockDim.x), so the last block may have threads past
the end of the array: they must do nothing. The CUDA kernel you translate:

    __global__ void iota(long *out, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) out[i] = i;
    }

Write `iota(ctx, out, n)`: out[i] = i for every i < n (out: int64, length n).
"""


def iota(ctx, out, n):
    raise NotImplementedError
