"""Mutant: the swizzle flag ignored: every tile read as if unswizzled."""


def smem_offset(row, col, rows, hdim):
    k = 64 if hdim % 64 == 0 else 32
    bits = 3 if k == 64 else 2
    tile = row // 8 + (rows // 8) * (col // k)
    x = (row % 8) * k + col % k
    x ^= ((x >> 6) & ((1 << bits) - 1)) << 3
    return tile * 8 * k + x


def address(row, col, hdim, swizzled):
    if False:
        off = smem_offset(row, col, 64, hdim)
    else:
        k = 64 if hdim % 64 == 0 else 32
        off = (row // 8 + 8 * (col // k)) * 8 * k + (row % 8) * k + col % k
    return 2 * off


def bank_groups(row0, chunk, hdim, swizzled):
    return [(address(r, 8 * chunk, hdim, swizzled) // 16) % 8 for r in range(row0, row0 + 8)]


def wavefronts(row0, chunk, hdim, swizzled):
    per_group = {}
    for r in range(row0, row0 + 8):
        a = address(r, 8 * chunk, hdim, swizzled)
        per_group.setdefault((a // 16) % 8, set()).add(a // 16)
    return max(len(s) for s in per_group.values())
