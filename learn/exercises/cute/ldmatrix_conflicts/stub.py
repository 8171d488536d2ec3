"""Exercise cute/ldmatrix_conflicts — why the swizzle: 8 rows of an ldmatrix in 8 bank groups.

ldmatrix (SM75_U32x4_LDSM_N, the copy flashlab uses from shared memory to registers) reads 8x8
16-bit matrices: per matrix, 8 lanes each give the address of one 16-byte row. Shared memory has 32
banks of 4 bytes; a 16-byte access covers 4 consecutive banks, the bank group (byte_address // 16)
% 8. One wavefront serves at most one 16-byte address per bank group; the 8 rows cost as many
wavefronts as the largest number of distinct addresses that fall in one group (1 = conflict-free).

The 8 rows are rows row0 .. row0 + 7 (row0 a multiple of 8), logical chunk `chunk` (columns
8 * chunk .. 8 * chunk + 7), of a (64, hdim) bf16 tile laid out as in cute/smem_swizzle, either
swizzled or the same tiling without the swizzle. Byte address = 2 * element offset.

Write bank_groups(row0, chunk, hdim, swizzled) -> list of the 8 bank groups (row order) and
wavefronts(row0, chunk, hdim, swizzled) -> int. (Unswizzled, a 64-column row is 128 bytes: all 8
rows in one bank group, 8 wavefronts; swizzled, 1.) No pycute.
"""


def bank_groups(row0, chunk, hdim, swizzled):
    raise NotImplementedError


def wavefronts(row0, chunk, hdim, swizzled):
    raise NotImplementedError
