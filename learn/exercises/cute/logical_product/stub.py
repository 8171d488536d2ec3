"""Exercise cute/logical_product — repeat a tile: (tile, where each copy goes).

logical_product(A, B) = (A, complement(A, size(A) * cosize(B)) o B): mode 0 is the tile A, mode 1
places copies of it, arranged by the layout B. For a compact tile A (cosize == size) the complement
is cosize(B):size(A), so copy j sits at size(A) * B(j):
    R(i, j) = A(i) + size(A) * B(j)
Example: A = (2, 2):(1, 2), B = 3:2 -> copies at 0, 8, 16 (gaps of one tile between them).

Write logical_product(a, b) -> int array T of shape (size(A), size(B)), T[i, j] = R(i, j) with i and
j 1-D indices (leftmost mode fastest). a is compact (any stride order), b any (shape, stride).
No pycute.
"""

import numpy as np  # noqa: F401


def logical_product(a, b):
    raise NotImplementedError
