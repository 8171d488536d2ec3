// src/cuda/sm90/tile_size.h — the Hopper forward's tile per head-dim bucket, and why.
//
// Constraints (bf16 / fp16, 2 K and 2 V stages):
//   shared memory  Q (M·D·2) + K, V (2 · N·D·2 each) <= 227 KiB (232,448 B) per block on H100/H200;
//                  O's own staging tile (M·D·2) where it still fits (kernel_traits.h kSeparateO:
//                  hdim <= 128), else O goes through Q's
//   registers      a consumer thread holds S (64·N/128 fp32), P (half as many registers: 16-bit)
//                  and O (64·D/128 fp32) at once under the overlap, within 240 (setmaxnreg)
//   wgmma          N of Q·Kᵀ is kBlockN (a multiple of 16: P·V consumes 16 keys per k-step)
// FlashAttention-3's causal column (kBlockM 128 = 2 consumer warpgroups), and its 192-row tile
// with 3 consumer warpgroups (setmaxnreg 32 / 160) at hdim 64:
//   D      M x N      smem (Q + K + V)        regs S + P + O
//   32     128 x 128  8 + 16 + 16 = 40 KiB     64 + 32 + 16
//   64     192 x 128  24 + 32 + 32 = 88 KiB    64 + 32 + 32
//   96     128 x 128  24 + 48 + 48 = 120 KiB   64 + 32 + 48
//   128    128 x 128  32 + 64 + 64 = 160 KiB   64 + 32 + 64
//   192    128 x 112  48 + 84 + 84 = 216 KiB   56 + 28 + 96
//   256    128 x 80   64 + 80 + 80 = 224 KiB   40 + 20 + 128
// ptxas (nvcc 13.0, sm_90a, -DNDEBUG): every bucket 0 spills, no C75xx, 168 registers at entry
// (24 producer / 240 consumer after setmaxnreg). Speed on the H100 (docs/perf.md, "Hopper
// forward"): 16k non-causal 451 / 588 / 662 TFLOP/s at hdim 64 / 128 / 256 with 128 x 128 at 64.
// hdim 64, 192 x 128 against 128 x 128 (H100, 2026-11-24, python -m flashlab.bench, one process):
// 16k 531 vs 456 (causal 489 vs 457), 2k 415 vs 407 (340 vs 319), 512 270 vs 275 (144 vs 145).
// Not kept: FlashAttention-3's 128 x 176 (hdim 128, non-causal): ptxas does not inline the
// variant's mask code at that width (C7510) and spills. 128 x 160 (session 13): the consumer's
// loop was not inlined either (C7510 at the call), and __forceinline__ on it spilled 76 bytes.
#pragma once

namespace flashlab {
namespace sm90 {

struct FwdTileSize {
  int block_m;
  int block_n;
  int stages;
};

constexpr FwdTileSize fwd_tile_size(int head_dim) {
  return head_dim <= 32    ? FwdTileSize{128, 128, 2}
         : head_dim <= 64  ? FwdTileSize{192, 128, 2}
         : head_dim <= 128 ? FwdTileSize{128, 128, 2}
         : head_dim <= 192 ? FwdTileSize{128, 112, 2}
                           : FwdTileSize{128, 80, 2};
}

// A second tile for short query sequences, where the wide tile's padding and causal diagonal cost
// more than its efficiency gains (fwd_launch.h use_short_tile: the tile computing fewer products,
// the narrow one's counted at kShortTileEfficiencyPct % against the wide one's); {0, 0, 0}: none.
// hdim 64: 192 x 128 ran 531 TFLOP/s at 16k against 128 x 128's 456 (0.86).
constexpr FwdTileSize fwd_short_tile_size(int head_dim) {
  return head_dim > 32 && head_dim <= 64 ? FwdTileSize{128, 128, 2} : FwdTileSize{0, 0, 0};
}
constexpr int kShortSeqlen = 4096;  // longer query sequences keep the wide tile (no host count)
constexpr int kShortTileEfficiencyPct = 86;

}  // namespace sm90
}  // namespace flashlab
