"""Solution for cute/acc_to_a_layout (the task is in stub.py)."""


def acc_to_a(mma_m, mma_n):
    return ((2, 2, 2), mma_m, mma_n // 2), ((1, 2, 4 * mma_m), 4, 8 * mma_m)
