"""Mutant: n-tiles k and k + MMA_N / 2 paired (logical_divide's modes taken the wrong way round)."""


def acc_to_a(mma_m, mma_n):
    return ((2, 2, 2), mma_m, mma_n // 2), ((1, 2, 4 * mma_m * (mma_n // 2)), 4, 4 * mma_m)
