"""Exercise cuda_basics/matvec — y = A x with coalesced reads of A (one warp per row).

A is (M, N) float32, row-major. One thread per row looks natural, but then the 32 lanes of a warp
read A[r0..r0+31, k]: 32 addresses N floats apart, 32 sectors per warp instruction. Instead give a
ROW to a WARP: blocks of (32, 4) threads, row = blockIdx.x * 4 + threadIdx.y (a warp with
row >= M does nothing), lane = threadIdx.x reads columns lane, lane + 32, ... (32 consecutive
floats per step: 4 sectors), keeps a partial dot product, and the warp sums the 32 partials with
shuffles (cuda_basics/warp_reduce); one lane writes y[row].

Write `matvec(ctx, A, x, y, M, N)`. Graded on values and on the sectors read from A.
"""


def matvec(ctx, A, x, y, M, N):
    raise NotImplementedError
