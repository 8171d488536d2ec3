"""Mutant: the thread strides swapped: (4, 8):(1, 32), g and q roles exchanged."""


def c_layout():
    return ((4, 8), (2, 2)), ((1, 32), (16, 8))


def a_layout():
    return ((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128))
