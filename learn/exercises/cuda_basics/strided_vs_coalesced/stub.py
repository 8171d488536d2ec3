"""Exercise cuda_basics/strided_vs_coalesced — the same work per thread, a different order.

T = blockDim.x * gridDim.x threads scale n floats, y = 2 x. A natural first version gives each
thread a CONTIGUOUS chunk of k = ceil(n / T) elements:

    def scale_chunked(ctx, x, y, n):
        t = ctx.blockIdx.x * ctx.blockDim.x + ctx.threadIdx.x
        k = -(-n // (ctx.blockDim.x * ctx.gridDim.x))
        for j in range(k):
            i = t * k + j                    # at step j, lane L reads element L*k + j: stride k
            if i < n:
                v = yield ctx.load(x, i)
                yield ctx.store(y, i, 2 * v)

At each step the 32 lanes of a warp touch addresses k floats apart: up to 32 sectors per warp
instruction instead of 4. Write `scale(ctx, x, y, n)`, which does the same k steps per thread but
INTERLEAVED: at step j thread t handles i = j * T + t, so a warp reads 32 consecutive floats.
Graded on values and on the sectors loaded and stored (n = 1000 with 64 threads: about 8x less).
"""


def scale(ctx, x, y, n):
    raise NotImplementedError
