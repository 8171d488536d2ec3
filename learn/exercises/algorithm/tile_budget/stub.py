"""Exercise algorithm/tile_budget — what a Hopper forward tile costs in shared memory and registers.

cuda_sm90's forward keeps, per CTA, in shared memory (16-bit elements, 2 bytes each):
  Q   one tile of block_m x head_dim
  K   `stages` buffers of block_n x head_dim (the pipeline), and V the same
  O   a staging tile of block_m x head_dim of its own, where it still fits; else O goes out
      through Q's tile (Q is no longer read once the tile's last Q·Kᵀ retired)
plus `barriers` bytes of mbarriers. Everything must fit the limit (227 KiB = 232,448 bytes on an
H100 / H200). O gets its own tile only if Q + K + V + O + barriers <= limit.

Per consumer thread (a warpgroup of 128 threads owns 64 query rows, and with the intra-warpgroup
overlap it holds three accumulators at once):
  S   64 x block_n fp32 scores          -> 64 * block_n / 128 registers
  P   the same scores in 16 bits        -> half as many registers (two per 32-bit register)
  O   64 x head_dim fp32 output         -> 64 * head_dim / 128 registers
The warpgroup's budget is 240 registers (setmaxnreg) with two consumer warpgroups, 160 with three,
and addresses, the softmax's row state and loop counters need some of it too (docs/learn/05-hopper.md
section 8; src/cuda/sm90/tile_size.h has the table).

1. smem_bytes(head_dim, block_m, block_n, stages) -> bytes of Q + K + V (no O, no barriers).
2. separate_o(head_dim, block_m, block_n, stages, limit, barriers) -> True if O's own staging tile
   fits beside Q, K, V and the barriers.
3. accumulator_registers(head_dim, block_n) -> S + P + O registers per consumer thread.
Worked example: hdim 128, 128 x 176, 2 stages: Q + K + V = 32 + 88 + 88 KiB = 212,992 bytes, so O
goes through Q's tile (32 KiB more would pass the limit); S + P + O = 88 + 44 + 64 = 196 registers.
"""


def smem_bytes(head_dim, block_m, block_n, stages):
    raise NotImplementedError


def separate_o(head_dim, block_m, block_n, stages, limit, barriers):
    raise NotImplementedError


def accumulator_registers(head_dim, block_n):
    raise NotImplementedError
