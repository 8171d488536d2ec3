"""Solution for cute/swizzle_fn (the task is in stub.py)."""


def swizzle(b, m, s, x):
    yyy = ((1 << b) - 1) << (m + s)
    return x ^ ((x & yyy) >> s)
