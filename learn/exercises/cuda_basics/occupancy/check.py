"""Spec of cuda_basics/occupancy: fixed cases, limits, then random configurations."""

from grading import close, equal

CONCEPT = "occupancy on an H100 SM: blocks limited by warps, registers (per-warp units), shared memory, 32"
NEEDS_GPU = False


def ref(regs, threads, smem):
    if not (1 <= threads <= 1024 and regs <= 255 and smem <= 232448):
        return 0
    warps = (threads + 31) // 32
    rpw = (regs * 32 + 255) // 256 * 256
    return min(64 // warps, (65536 // rpw) // warps if regs else 32,
               233472 // ((smem + 1024 + 127) // 128 * 128), 32)


FIXED = [(64, 128, 48 * 1024), (32, 32, 0), (255, 1024, 0), (24, 64, 0), (40, 48, 1000), (168, 256, 0),
         (128, 128, 100 * 1024), (32, 256, 227 * 1024), (32, 256, 228 * 1024), (32, 1025, 0), (256, 32, 0),
         (16, 96, 7 * 1024), (72, 384, 0), (33, 160, 513), (16, 400, 0), (32, 64, 77824)]


def check(mod, rng):
    cases = FIXED + [(int(rng.integers(1, 256)), int(rng.integers(1, 1025)), int(rng.integers(0, 120000)))
                     for _ in range(200)]
    for regs, threads, smem in cases:
        name = f"regs {regs}, threads {threads}, smem {smem}"
        exp = ref(regs, threads, smem)
        equal(name, mod.blocks_per_sm(regs, threads, smem), exp, what="blocks per SM")
        close(name, mod.occupancy(regs, threads, smem), exp * ((threads + 31) // 32) / 64,
              rtol=1e-12, atol=1e-12, what="occupancy")
