"""Mutant: the value mode ordered (column half, column pair, row half)."""


def acc_to_a(mma_m, mma_n):
    return ((2, 2, 2), mma_m, mma_n // 2), ((4 * mma_m, 1, 2), 4, 8 * mma_m)
