"""Exercise cute/mma_tv_layout — the m16n8k16 fragments as CuTe (thread, value) layouts.

CuTe describes who holds what in an MMA with a TV layout: (thread, value) -> index of the element
in the tile, the tile indexed column-major (m + 16 * n for the 16 x 8 C tile, m + 16 * k for the
16 x 16 A tile). The PTX ISA ("Matrix Fragments for mma.m16n8k16"), g = t / 4, q = t % 4:
  C/D (f32, 4 values):  c_v at row g + 8 * (v // 2), col 2 * q + v % 2
  A (16-bit, 8 values): a_v at row g + 8 * ((v // 2) % 2), col 2 * q + v % 2 + 8 * (v // 4)
Thread t is split as (q, g) = (t % 4, t / 4), the leftmost mode fastest: the thread mode has shape
(4, 8). The value mode of C has shape (2, 2) (column + 1, row + 8), that of A (2, 2, 2).

Write c_layout() and a_layout() -> (shape, stride), e.g. ((4, 8), (2, 2)), ((s, s), (s, s)), such
that layout(t, v) is that index (CuTe: SM80_16x8x16_F32BF16BF16F32_TN's CLayout and ALayout).
Graded on all 32 x 4 (32 x 8) pairs against the PTX mapping. No pycute.
"""


def c_layout():
    raise NotImplementedError


def a_layout():
    raise NotImplementedError
