"""Exercise cute/logical_divide_2d — tiling a matrix mode by mode.

With a tiler that is a tuple (one tiler per mode), logical_divide divides each mode separately:
an (M, N) layout divided by (tm, tn) becomes ((tm, M / tm), (tn, N / tn)): rows split into
(row in tile, tile row), columns into (col in tile, tile col). Its value at
((i, bi), (j, bj)) is A(i + tm * bi, j + tn * bj).

Write logical_divide_2d(a, tm, tn) -> int array T of shape (tm, M // tm, tn, N // tn),
T[i, bi, j, bj] = that offset. a = ((M, N), (row stride, col stride)) (row-major, column-major or
padded). No pycute.
"""

import numpy as np  # noqa: F401


def logical_divide_2d(a, tm, tn):
    raise NotImplementedError
