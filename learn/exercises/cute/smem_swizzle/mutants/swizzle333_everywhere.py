"""Mutant: Swizzle<3,3,3> applied to the whole offset, also for the 32-column atom."""


def phys_chunk(row, c):
    return c ^ (row % 8)


def smem_offset(row, col, rows, hdim):
    k = 64 if hdim % 64 == 0 else 32
    tile = row // 8 + (rows // 8) * (col // k)
    x = (row % 8) * k + col % k
    x += tile * 8 * k
    return x ^ (((x >> 6) & 7) << 3)
