"""Exercise cute/size_cosize — the domain and the codomain of a layout.

size(L) is the number of coordinates: the product of all shape entries. cosize(L) is the extent of
memory the layout touches: 1 + the largest offset, which for non-negative strides is
L(size - 1) + 1 = 1 + sum over leaves of (shape_i - 1) * stride_i. A compact layout has
cosize == size; (4, 8):(1, 8) has a gap (cosize 60, size 32); a stride-0 mode broadcasts.

Write size(shape) and cosize(shape, stride) (nested tuples or ints, strides >= 0). No pycute.
"""


def size(shape):
    raise NotImplementedError


def cosize(shape, stride):
    raise NotImplementedError
