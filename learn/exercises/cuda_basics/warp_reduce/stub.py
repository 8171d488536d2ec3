"""Exercise cuda_basics/warp_reduce — a warp sum with shuffles (no shared memory, no barrier).

The 32 lanes of a warp can read each other's registers: __shfl_xor_sync(mask, v, m) returns the v
of lane (lane ^ m). Five butterfly steps give EVERY lane the warp's total:

    for (int m = 16; m > 0; m /= 2) v += __shfl_xor_sync(0xffffffff, v, m);

(__shfl_down_sync(.., v, m) instead leaves the total in lane 0 only.) Every lane of the warp must
execute the shuffle: a lane that skips it (a bound check around the shuffle) leaves its partner
reading an inactive lane, which is undefined; the simulator reports it.

Write `warp_sum(ctx, x, out, n)` (float64): every thread i < n writes out[i] = the sum of x over
the 32 elements of its warp (elements past n count 0). Blocks are multiples of 32 threads; the
grid is ceil(n / blockDim.x). Use `v = yield ctx.shfl_xor(v, m)`.
"""


def warp_sum(ctx, x, out, n):
    raise NotImplementedError
