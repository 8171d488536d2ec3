"""Mutant: C value strides (8, 16): value 1 is row + 8 instead of column + 1."""


def c_layout():
    return ((4, 8), (2, 2)), ((32, 1), (8, 16))


def a_layout():
    return ((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128))
