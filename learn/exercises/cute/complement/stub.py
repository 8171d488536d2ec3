"""Exercise cute/complement — the layout of "everything else", the rest of a tiling.

complement(A, M) is the layout A* that, put next to A as (A, A*), covers 0 .. M-1 (rounded up)
with no overlap: A* enumerates the gaps of A and then the repeats of A up to M. Algorithm:
sort A's flat modes by stride (skip stride-0 and shape-1 modes); cur = 1; for each (s:d) in that
order emit the mode (d // cur):cur (the gap below this mode) and set cur = s * d; finally emit
ceil(M / cur):cur (the repeats). Example: complement(4:2, 24) = (2, 3):(1, 8); complement((2, 2):(4, 1), 16)
= (1, 2, 2):(1, 2, 8) (the 1-mode is harmless).

Write complement(shape, stride, cotarget) -> (shape, stride). Graded as a function (same size,
same value at every index; you need not coalesce). No pycute.
"""


def complement(shape, stride, cotarget):
    raise NotImplementedError
