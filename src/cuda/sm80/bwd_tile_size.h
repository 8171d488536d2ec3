// src/cuda/sm80/bwd_tile_size.h — the one place the backward tile sizes are chosen, and why.
//
// A CTA of the main kernel owns block_n keys (K, V and the dK, dV accumulators of one query head)
// and walks the query blocks that see them, block_m rows at a time. Five products per step:
//   S = Q·Kᵀ, dP = dO·Vᵀ      (block_m × block_n)   warps (atom_m_sdp, warps / atom_m_sdp)
//   dV += Pᵀ·dO, dK += dSᵀ·Q  (block_n × D)         warps (atom_n_dkv, warps / atom_n_dkv)
//   dQ = dS·K                 (block_m × D)         warps (atom_m_dq, warps / atom_m_dq)
// Every warp tile is 16 × 16 per MMA step (one ldmatrix.x4 per operand), so each extent must be a
// multiple of 16 · (warps along it).
// Shared memory (16-bit elements): Q and dO (block_m × D, `stages` buffers each: 2 = the next
// query block loads while this one computes), K and V (block_n × D), P and dS (block_m × block_n,
// for the transposed products). The small set fits 99 KiB, the opt-in limit of sm_86 / sm_89, so
// it runs on every GPU from Ampere on; the large set (below) needs up to 160 KiB. Registers: dK and dV
// accumulators are 2 · block_n · D / threads fp32, S and dP 2 · block_m · block_n / threads; the dQ product
// adds block_m · D / threads inside its scope. FlashAttention-2's sm80 backward uses 64 × 128 tiles for
// D 64..128 with 144+ KiB of smem; its sm86 configurations (<= 99 KiB) are the model here:
//   D 32   64 × 128, 8 warps, 2 stages   64 KiB. Wide key block: fewer dQ atomics per query row.
//   D 64   64 × 128, 8 warps, 2 stages   96 KiB. dK + dV 64, S + dP 64 registers.
//   D 96   64 × 64,  8 warps, 2 stages   88 KiB. 64 × 128 would need 128 KiB.
//   D 128  64 × 64,  8 warps, 1 stage    80 KiB. Two Q/dO stages would need 112 KiB.
//   D 192  32 × 64,  8 warps, 1 stage    80 KiB. 64 × 64 needs 112 KiB; a 64-key block keeps the
//          dQ atomics per row at seqlen_k / 64 (32 × 64 rather than 64 × 32).
//   D 256  32 × 32,  4 warps, 1 stage    68 KiB. 8 warps cannot tile 32 × 32 in 16 × 16 pieces;
//          dK + dV are 128 registers.
// Dropout keeps the same tiles (the Philox words of one row are drawn in a rolled loop).
// ptxas -v (CUDA 13.0, bf16 and fp16 alike), spill stores in bytes without / with dropout:
//   every bucket's main and deterministic-dQ kernels 0 / 0 on sm_80 and sm_90a, except the main
//   kernel of D 256: 56 / 108 (sm_80), 80 / 120 (sm_90a) — dK + dV (128 registers) and the block's
//   dQ product (64) are live together; splitting dQ into two column halves would remove it.
// (registers: 140..255 per kernel; the table is in docs/cuda-kernels.md, "Backward")
#pragma once

namespace flashlab {
namespace sm80 {

// Which tile set a GPU gets, by its opt-in shared memory per block (bwd_launch.h asks the device).
enum class BwdTileSet : int {
  kSmall = 0,   // <= 99 KiB: every GPU from Ampere on (sm_86 / sm_89 limit)
  kLarge = 1,   // <= 163 KiB: A100, H100, H200
  kHopper = 2,  // <= 227 KiB: H100, H200 (differs from kLarge at D 256 only)
};

struct BwdTileSize {
  int block_m;
  int block_n;
  int warps;
  int stages;      // Q / dO buffers: 2 = double-buffered
  int atom_m_sdp;  // warps along block_m in S and dP
  int atom_n_dkv;  // warps along block_n in dK and dV
  int atom_m_dq;   // warps along block_m in dQ
  // Order of the block's last three products: dQ (and its atomics) before dV and dK, so the
  // reductions drain under the two products, or after them. Measured on an H200 (2026-11-21, the
  // issue grid three times, own milliseconds): dQ first is 3 % faster at D 256 (Hopper set) and
  // 2 % slower at D 128 (0.5 % at D 64), every seqlen and mask alike — so only the D > 192 tiles
  // take it (the small and large D-256 sets follow the Hopper set's measurement unmeasured).
  bool dq_first = false;
  // Masked blocks (causal / window diagonal) without softcap and ALiBi: the simple score loop
  // with the mask compiled in (true), or the general loop (common/variant.h). Measured on an H200
  // (2026-11-21, one device call, together with the shared-memory epilogues of tile_store.h):
  // causal backward 2-33 % faster at hdim 128 and 256 (most at 512-2k tokens). At hdim 64's
  // 128 x 128 tile the simple loop raised the main kernel's spills (ptxas, sm_90a: 220 -> 244
  // bytes) and 8k tokens ran 7-13 % slower, so that tile keeps the general loop.
  bool masked_simple = true;
};

// The large set (BwdTileSet::kLarge): GPUs whose opt-in shared memory per block holds it — A100 (163 KiB) and
// H100 (227 KiB); run_bwd() asks the device. FlashAttention-2's sm80 configurations:
//   D 32   as the small set (64 × 128 already, 64 KiB)
//   D 64   128 × 128, 8 warps, 2 stages  160 KiB. S + dP 128, dK + dV 64 registers. S / dP warps
//          4 × 2 (FA2: 2 × 4): 1-2 % faster on an H200 (A/B, 2026-11-21); 128 × 64 tiles were
//          25-35 % slower; 64 × 128 3-7 % slower (H100, before the dq_accum tiles).
//   D 96   64 × 128,  8 warps, 2 stages  128 KiB.
//   D 128  64 × 128,  8 warps, 2 stages  160 KiB. Twice the keys per CTA of the small set: half
//          the Q / dO reloads and dQ atomics per key; dK + dV 128, S + dP 64 registers.
//   D 192  64 × 64,   8 warps, 2 stages  160 KiB. (4, 2, 2) warp grids: 16 rows of S per warp.
//   D 256  64 × 64,   8 warps, 1 stage   144 KiB. dK + dV 128 registers, dQ product 64.
// Measured on the H100 (docs/perf.md), hdim 128 vs SDPA flash: small set 0.36–0.62×, large set
// 0.57–0.74×. ptxas (sm_90a, bucket 128): the large main kernel spills 68 / 144 bytes without /
// with dropout (FlashAttention-2's own kernel of this shape spills too).
//
// The Hopper set (BwdTileSet::kHopper): GPUs with >= 209 KiB of opt-in shared memory (H100, H200: 227 KiB).
// It differs from the large set only at D 256: two Q / dO stages (64 × 64, 8 warps, 208 KiB), so
// the next query block loads while this one computes, as FlashAttention-2 does there (its
// >= 176 KiB configuration double-buffers Q only). Measured on an H200 (docs/perf.md), hdim 256
// backward vs SDPA flash: one stage 0.73–0.95×.
constexpr BwdTileSize bwd_tile_size(int head_dim, BwdTileSet set = BwdTileSet::kSmall) {
  if (set == BwdTileSet::kHopper && head_dim > 192) return BwdTileSize{64, 64, 8, 2, 4, 2, 2, true};
  if (set != BwdTileSet::kSmall) {
    return head_dim <= 32    ? BwdTileSize{64, 128, 8, 2, 2, 4, 4}
           : head_dim <= 64  ? BwdTileSize{128, 128, 8, 2, 4, 4, 4, false, false}
           : head_dim <= 96  ? BwdTileSize{64, 128, 8, 2, 2, 4, 4}
           : head_dim <= 128 ? BwdTileSize{64, 128, 8, 2, 2, 4, 2}
           : head_dim <= 192 ? BwdTileSize{64, 64, 8, 2, 4, 2, 2}
                             : BwdTileSize{64, 64, 8, 1, 4, 2, 2, true};
  }
  return head_dim <= 32    ? BwdTileSize{64, 128, 8, 2, 2, 4, 4}
         : head_dim <= 64  ? BwdTileSize{64, 128, 8, 2, 2, 4, 4}
         : head_dim <= 96  ? BwdTileSize{64, 64, 8, 2, 2, 4, 4}
         : head_dim <= 128 ? BwdTileSize{64, 64, 8, 1, 2, 4, 4}
         : head_dim <= 192 ? BwdTileSize{32, 64, 8, 1, 2, 4, 2}
                           : BwdTileSize{32, 32, 4, 1, 2, 2, 2, true};
}

}  // namespace sm80
}  // namespace flashlab
