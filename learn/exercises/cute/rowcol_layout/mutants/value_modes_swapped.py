"""Mutant: rows from get<0,0> (the column pair) and columns from get<0,1>."""


def rowcol(mma_m, mma_n):
    return ((2, mma_m), (2, mma_n)), ((1, 4), (2, 4 * mma_m))


def register(row, col, mma_m, mma_n):
    return (row % 2) + (row // 2) * 4 + (col % 2) * 2 + (col // 2) * 4 * mma_m
