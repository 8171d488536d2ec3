"""Exercise cute/layout_index — a CuTe layout is a function: coordinate -> offset.

A layout is a pair (shape, stride) of congruent (possibly nested) integer tuples, e.g.
(4, 8):(8, 1) (written shape:stride) is a 4 x 8 row-major matrix, (4, 8):(1, 4) the column-major
one, ((2, 4), 8):((1, 16), 2) a nested one. The offset of a coordinate with the same nesting is
the inner product: sum over the leaves of coord_i * stride_i.

A coordinate may also be a plain int (a "1-D index"): it is first split into a coordinate of the
shape *colexicographically*, the LEFTMOST mode fastest (CuTe's convention, unlike NumPy's C order):
for shape (4, 8), index i is (i % 4, i // 4); for a nested mode, recurse the same way.

Write
  crd2idx(coord, shape, stride) -> int    coord: an int, or a tuple congruent to shape (whose
                                          entries may again be ints standing for a whole sub-mode)
  row_major(shape) -> tuple               the compact strides with the LAST mode contiguous
  col_major(shape) -> tuple               the compact strides with the FIRST mode contiguous
shape is a flat tuple of ints in row_major / col_major. No pycute: compute it by hand.
"""


def crd2idx(coord, shape, stride):
    raise NotImplementedError


def row_major(shape):
    raise NotImplementedError


def col_major(shape):
    raise NotImplementedError
