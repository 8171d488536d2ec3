"""Mutant: the yyy field read one bit low, at M + S - 1 (off-by-one in the shift)."""


def swizzle(b, m, s, x):
    yyy = ((1 << b) - 1) << (m + s - 1)
    return x ^ ((x & yyy) >> (s - 1))
