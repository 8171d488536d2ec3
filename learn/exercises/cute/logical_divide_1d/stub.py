"""Exercise cute/logical_divide_1d — split a layout into tiles: (tile, rest).

logical_divide(A, B) = A o (B, complement(B, size(A))). B is the tiler: it says which of A's 1-D
indices form tile 0 (B(0), B(1), ...); its complement B* enumerates where the other tiles start.
The result has two modes: mode 0 walks inside a tile, mode 1 over the tiles:
    R(i, j) = A(B(i) + B*(j))        (A, B, B* applied to 1-D indices)
Example: A = (4, 2, 3):(2, 1, 8), B = 4:2: B* = complement(4:2, 24) = (2, 3):(1, 8) and
R = ((2, 2), (2, 3)):((4, 1), (2, 8)).  With B = 4:1 the tiles are 4 consecutive indices of A;
with B = 4:2 a tile takes every other index.

Write logical_divide_1d(a, b) -> int array T of shape (size(B), size(A) // size(B)), T[i, j] =
R(i, j). a and b are (shape, stride) pairs (flat tuples or ints); B spans a power of two that divides size(A)
in every test. No pycute (you will need the complement: see cute/complement).
"""

import numpy as np  # noqa: F401


def logical_divide_1d(a, b):
    raise NotImplementedError
