"""Exercise cute/swizzle_fn — Swizzle<B, M, S>: XOR one bit field of the offset into another.

A swizzle is a function on offsets (applied after the layout). With B bits, base M and shift S
(S >= B > 0 here): take the B bits of the offset at positions [M + S, M + S + B) (the "yyy" field)
and XOR them into the B bits at [M, M + B) (the "zzz" field); every other bit is unchanged:
    swizzle(x) = x ^ ((x & (((1 << B) - 1) << (M + S))) >> S)
It is a bijection on [0, 2^(B+M+S)) and repeats above it. Swizzle<3,3,3> on bf16 offsets: bits
0..2 are the element in a 16-byte chunk (kept), bits 3..5 the chunk (XORed with bits 6..8 = the row
mod 8 in a 64-element row).

Write swizzle(b, m, s, x) -> int. No pycute.
"""


def swizzle(b, m, s, x):
    raise NotImplementedError
