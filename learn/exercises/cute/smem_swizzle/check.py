"""Spec of cute/smem_swizzle: flashlab's SmemLayoutQ/KV built with pycute (common.flashlab_smem)."""

from grading import Fail
from cute.common import cute, flashlab_smem

CONCEPT = "flashlab smem: Swizzle<3,3,3> o (8,64) atom tiled by tile_to_shape; chunk c of row r -> c ^ (r % 8)"
NEEDS_GPU = False


def check(mod, rng):
    cute()
    sw = flashlab_smem(64, 64)
    for r in range(64):
        for ch in range(8):
            exp = (sw(r, 8 * ch) % 64) // 8
            if mod.phys_chunk(r, ch) != exp:
                raise Fail("phys_chunk", f"row {r}, chunk {ch}: got {mod.phys_chunk(r, ch)}, expected {exp}")
    for rows, hdim in ((64, 64), (64, 32), (128, 128), (64, 96), (128, 32)):
        lay = flashlab_smem(rows, hdim)
        coords = [(r, c) for r in range(16) for c in range(hdim)]
        coords += [(int(rng.integers(rows)), int(rng.integers(hdim))) for _ in range(400)]
        for r, c in coords:
            got, exp = mod.smem_offset(r, c, rows, hdim), lay(r, c)
            if got != exp:
                raise Fail(f"smem ({rows}, {hdim})", f"element ({r}, {c}): got {got}, expected {exp}")
