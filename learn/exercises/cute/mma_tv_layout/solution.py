"""Solution for cute/mma_tv_layout (the task is in stub.py)."""


def c_layout():
    return ((4, 8), (2, 2)), ((32, 1), (16, 8))


def a_layout():
    return ((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128))
