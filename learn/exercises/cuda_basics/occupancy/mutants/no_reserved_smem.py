"""Mutant: the 1 KiB per-block system reservation is forgotten (smem = 0 counts as one 128-byte unit)."""


def blocks_per_sm(regs, threads, smem):
    if not (1 <= threads <= 1024 and regs <= 255 and smem <= 232448):
        return 0
    warps = -(-threads // 32)
    by_threads = 64 // warps
    regs_per_warp = -(-regs * 32 // 256) * 256
    by_regs = (65536 // regs_per_warp) // warps if regs > 0 else 32
    by_smem = 233472 // max(128, -(-smem // 128) * 128)
    return min(by_threads, by_regs, by_smem, 32)


def occupancy(regs, threads, smem):
    return blocks_per_sm(regs, threads, smem) * -(-threads // 32) / 64
