// src/cuda/sm80/tile_size.h — the one place the forward tile sizes are chosen, and why.
//
// A CTA owns block_m query rows of one (batch, head) and walks the keys block_n at a time; its
// `warps` warps split the rows (16 rows per MMA tile, so block_m / (16 * warps) tiles per warp).
// Shared memory holds Q (block_m x D), one K and one V tile (block_n x D each), 16-bit elements.
//
// Registers per thread: S is block_m * block_n / threads fp32 values, O block_m * D / threads, P
// (S as 16-bit) half of S; with the operand fragments of one k-step they must fit in 255.
// Constraints every choice meets:
//   * smem <= 99 KiB, the opt-in limit of sm_86 / sm_89: one set of tiles runs on every GPU from
//     Ampere on (A100 and H100 allow 163 / 227 KiB; a second, larger set is future work).
//   * block_m is a multiple of 16 * warps (the rows of one MMA tile row of the CTA).
//   * block_n is a multiple of 16 (the k-step of P·V, whose A operand is P).
// The choices follow FlashAttention-2's measured sm80 configurations (flash_fwd_launch_template.h):
//   D 32       128 x 64, 4 warps: 128 x 128 (FA2's choice) spilled 220 bytes here: with only two
//              k-steps both K fragments (64 registers) are live beside S. smem 16 KiB.
//   D 64       128 x 64, 4 warps: S 64 + O 64 registers, smem 32 KiB. FA2's 128 x 128 (S 128
//              registers) spilled 364 bytes here once the unmasked key blocks got a loop of their
//              own; A/B on an H200 (2026-11-21, issue grid, same call, twice): 128 x 64 is 4–17 %
//              faster at every point (vs SDPA flash 0.90–0.97x -> 0.95–1.09x).
//   D 96, 128  128 x 64, 4 warps: O is 96..128 registers, so S stays at 64. smem 48 / 64 KiB.
//   D 192      128 x 64, 8 warps: 16 rows per warp keep O at 96 registers. smem 96 KiB.
//   D 256      64 x 64, 4 warps: O 128, S 32 registers; 128 rows would need 128 KiB of smem.
//   dropout    (FA2 does the same) block_n halves for D <= 128: the Philox rounds need registers.
// ptxas -v (CUDA 13.0, sm_80, bf16), spill stores in bytes without / with dropout:
//   D 32: 16 / 0   D 64: 32 / 0 (then 128 x 128)   D 96: 68 / 0   D 128: 60 / 0   D 192: 0 / 0
//   D 256: 0 / 0 (before the forward loop split; sm_90a after it: docs/cuda-kernels.md)
// (sm_90a: docs/cuda-kernels.md; they move by tens of bytes with unrelated edits: ptxas
// heuristics, not a budget to tune to)
// FlashAttention-2's own 128 x 64 x 4 hdim-128 kernel reports 172 bytes; whether these few
// spills (loop-invariant scalars, by the counts) cost time is for the profiler to say.
#pragma once

namespace flashlab {
namespace sm80 {

struct FwdTileSize {
  int block_m;
  int block_n;
  int warps;
};

constexpr FwdTileSize fwd_tile_size(int head_dim, bool dropout) {
  if (dropout) {  // Philox state needs ~20 more registers: halve the key block where S is wide
    return head_dim <= 64    ? FwdTileSize{128, 64, 4}
           : head_dim <= 128 ? FwdTileSize{128, 32, 4}
           : head_dim <= 192 ? FwdTileSize{128, 64, 8}
                             : FwdTileSize{64, 64, 4};
  }
  return head_dim <= 32    ? FwdTileSize{128, 64, 4}
         : head_dim <= 64  ? FwdTileSize{128, 64, 4}
         : head_dim <= 128 ? FwdTileSize{128, 64, 4}
         : head_dim <= 192 ? FwdTileSize{128, 64, 8}
                           : FwdTileSize{64, 64, 4};
}

}  // namespace sm80
}  // namespace flashlab
