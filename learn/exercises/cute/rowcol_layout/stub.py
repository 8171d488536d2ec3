"""Exercise cute/rowcol_layout — flashlab's accumulator viewed as (rows, cols) (fragments.h).

A thread's accumulator of a (BLK_M, BLK_N) tile after partition_fragment_C is compact with shape
((2, 2), MMA_M, MMA_N): mode 0 = the 4 values of one 16x8 tile (column pair fastest, then row half,
see cute/mma_tv_layout), then the MMA_M x MMA_N tiles. Strides: ((1, 2), 4, 4 * MMA_M).
The softmax wants (row, col): flashlab's rowcol_layout regroups the modes as
    make_layout(make_layout(get<0,1>(acc), get<1>(acc)), make_layout(get<0,0>(acc), get<2>(acc)))
i.e. rows = (row half, m tile), cols = (column pair, n tile): ((2, MMA_M), (2, MMA_N)).

Write rowcol(mma_m, mma_n) -> (shape, stride) exactly (nested tuples), and
register(row, col, mma_m, mma_n) -> the register index (0 .. 4 * MMA_M * MMA_N - 1) holding the
thread's row `row` (0 .. 2 MMA_M - 1), column `col` (0 .. 2 MMA_N - 1). No pycute.
"""


def rowcol(mma_m, mma_n):
    raise NotImplementedError


def register(row, col, mma_m, mma_n):
    raise NotImplementedError
