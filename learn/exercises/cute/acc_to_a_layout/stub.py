"""Exercise cute/acc_to_a_layout — two n8 accumulator tiles are one k16 A operand (fragments.h).

In P V, P (the softmax of S, an accumulator of shape ((2, 2), MMA_M, MMA_N), strides
((1, 2), 4, 4 * MMA_M)) is the A operand of m16n8k16, whose fragment per k16 step has 8 values
(column pair, row half, column half) (cute/mma_tv_layout). Columns 0..7 of a k16 step are n-tile
2k, columns 8..15 n-tile 2k + 1, and in each the (column pair, row half) order of C and A agree: so
flashlab's acc_to_a_layout only regroups, no data moves:
    split = logical_divide(acc, (_, _, 2))              // ((2, 2), MMA_M, (2, MMA_N / 2))
    make_layout(make_layout(get<0>(split), get<2,0>(split)), get<1>(split), get<2,1>(split))
giving (((2, 2), 2), MMA_M, MMA_N / 2): value mode of 8, then m tiles, then k16 steps.

Write acc_to_a(mma_m, mma_n) -> (shape, stride) (the value mode may be written flat, (2, 2, 2)).
Graded as a function with mode sizes (8, MMA_M, MMA_N / 2). No pycute.
"""


def acc_to_a(mma_m, mma_n):
    raise NotImplementedError
