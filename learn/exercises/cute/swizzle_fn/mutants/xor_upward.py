"""Mutant: the zzz field XORed into the yyy field (the direction of the XOR reversed)."""


def swizzle(b, m, s, x):
    yyy = ((1 << b) - 1) << (m + s)
    return x ^ ((x & (yyy >> s)) << s)
