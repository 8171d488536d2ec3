"""Exercise cute/smem_swizzle — flashlab's swizzled shared-memory tile (kernel_traits.h).

flashlab stores Q, K, V tiles (16-bit elements) in shared memory as
    SmemLayoutAtom = composition(Swizzle<B, 3, 3>{}, Layout<Shape<_8, K>, Stride<K, _1>>{})
    SmemLayoutQ    = tile_to_shape(SmemLayoutAtom{}, Shape<kBlockM, kHeadDim>{})
with K = kBlockKSmem = 64 if kHeadDim % 64 == 0 else 32, and B = 3 for K = 64, B = 2 for K = 32.
The atom is 8 rows x K columns, row-major (offset x = (row % 8) * K + col % K), then swizzled
(cute/swizzle_fn: bits [6, 6 + B) of x XORed into bits [3, 3 + B), i.e. into the 16-byte chunk
index); tile_to_shape repeats the atom as a blocked_product, tiles down the rows first: atom
(tr, tc) = (row // 8, col // K) starts at (tr + (rows / 8) * tc) * 8 * K.
For K = 64 that means the 16-byte chunk c of row r is stored at chunk c ^ (r % 8) of that row.

Write phys_chunk(row, c) (K = 64: the stored chunk of logical chunk c, 0..7, of row `row`) and
smem_offset(row, col, rows, hdim) (the element offset in the (rows, hdim) tile). No pycute.
"""


def phys_chunk(row, c):
    raise NotImplementedError


def smem_offset(row, col, rows, hdim):
    raise NotImplementedError
