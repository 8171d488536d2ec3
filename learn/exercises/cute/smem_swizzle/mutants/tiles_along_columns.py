"""Mutant: tile_to_shape taken as row-major over the atoms (columns first)."""


def phys_chunk(row, c):
    return c ^ (row % 8)


def smem_offset(row, col, rows, hdim):
    k = 64 if hdim % 64 == 0 else 32
    bits = 3 if k == 64 else 2
    tile = col // k + (hdim // k) * (row // 8)
    x = (row % 8) * k + col % k
    x ^= ((x >> 6) & ((1 << bits) - 1)) << 3
    return tile * 8 * k + x
