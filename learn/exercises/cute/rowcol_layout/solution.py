"""Solution for cute/rowcol_layout (the task is in stub.py)."""


def rowcol(mma_m, mma_n):
    return ((2, mma_m), (2, mma_n)), ((2, 4), (1, 4 * mma_m))


def register(row, col, mma_m, mma_n):
    return (row % 2) * 2 + (row // 2) * 4 + (col % 2) + (col // 2) * 4 * mma_m
