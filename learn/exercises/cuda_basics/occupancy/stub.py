"""Exercise cuda_basics/occupancy — how many blocks of a kernel fit on one H100 SM.

An SM runs several blocks at once if their resources fit. H100 (sm_90), per SM: 65536 32-bit
registers, 2048 threads (64 warps), 228 KiB (233472 bytes) of shared memory, at most 32 blocks.
Per block: at most 1024 threads and 227 KiB (232448 bytes) of shared memory; per thread at most
255 registers. Write `blocks_per_sm(regs, threads, smem)` (registers per thread, threads per
block, shared-memory bytes per block) with this model:

* a configuration beyond a per-block or per-thread limit (or threads < 1) runs 0 blocks;
* warps = ceil(threads / 32): a partial warp occupies a whole warp;
* threads:   floor(64 / warps) blocks;
* registers: allocated per WARP in units of 256: regs_per_warp = ceil(regs * 32 / 256) * 256;
             floor(65536 / regs_per_warp) warps fit, so floor(that / warps) blocks;
* shared:    each block also reserves 1 KiB for the system, and allocations are rounded up to
             128 bytes: per_block = ceil((smem + 1024) / 128) * 128; floor(233472 / per_block);
* the answer is the minimum of the three and 32.

Then `occupancy(regs, threads, smem)` = resident warps / 64 (a float in [0, 1]).
E.g. 128 threads, 64 registers, 48 KiB: threads 16, registers 8, shared 4 -> 4 blocks, 0.25.
"""


def blocks_per_sm(regs, threads, smem):
    raise NotImplementedError


def occupancy(regs, threads, smem):
    raise NotImplementedError
