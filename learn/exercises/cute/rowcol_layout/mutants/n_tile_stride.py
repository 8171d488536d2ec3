"""Mutant: the n-tile stride taken as 4 (MMA_M forgotten)."""


def rowcol(mma_m, mma_n):
    return ((2, mma_m), (2, mma_n)), ((2, 4), (1, 4))


def register(row, col, mma_m, mma_n):
    return (row % 2) * 2 + (row // 2) * 4 + (col % 2) + (col // 2) * 4
