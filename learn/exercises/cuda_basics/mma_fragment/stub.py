"""Exercise cuda_basics/mma_fragment — who holds what in an mma.m16n8k16 accumulator.

A warp-wide tensor-core instruction mma.sync.aligned.m16n8k16 (fp16/bf16 in, fp32 accumulate)
computes a 16 x 8 tile D = A B + C. D is not in one thread: each of the 32 lanes holds 4 fp32
registers d0..d3 of it. The PTX ISA ("Matrix Fragments for mma.m16n8k16", the C/D layout):

    groupID = lane / 4 (0..7)            threadID_in_group = lane % 4 (0..3)
    d_i:  row = groupID        for i = 0, 1;   row = groupID + 8   for i = 2, 3
          col = 2 * threadID_in_group + (i % 2)

A 16 x N accumulator (N = 8 * n_tiles: FlashAttention's S = Q K^T over a key block, or O) is
n_tiles such tiles side by side; lane's register r = 4 * j + i holds element i of tile j, whose
columns start at 8 * j.

Write `acc_coord(lane, r)` -> (row, col) in the 16 x N accumulator, and `gather(frags)`: frags is
(32, 4 * n_tiles), frags[lane, r] the value lane holds in register r; return the (16, 8 * n_tiles)
matrix (what storing the accumulator to memory produces).
"""

import numpy as np  # noqa: F401


def acc_coord(lane, r):
    raise NotImplementedError


def gather(frags):
    raise NotImplementedError
