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
//          128 x 192  24 + 72 + 72 = 168 KiB   96 + 48 + 48   (long key sequences, below)
//   128    128 x 128  32 + 64 + 64 = 160 KiB   64 + 32 + 64
//          128 x 176  32 + 88 + 88 = 208 KiB   88 + 44 + 64   (long key sequences, below)
//   192    128 x 112  48 + 84 + 84 = 216 KiB   56 + 28 + 96
//   256    128 x 80   64 + 80 + 80 = 224 KiB   40 + 20 + 128
// ptxas (nvcc 13.0, sm_90a, -DNDEBUG): every bucket 0 spills, no C75xx, 168 registers at entry
// (24 producer / 240 consumer after setmaxnreg). Speed on the H100 (docs/perf.md, "Hopper
// forward"): 16k non-causal 451 / 588 / 662 TFLOP/s at hdim 64 / 128 / 256 with 128 x 128 at 64.
// hdim 64, 192 x 128 against 128 x 128 (H100, 2026-11-24, python -m flashlab.bench, one process):
// 16k 531 vs 456 (causal 489 vs 457), 2k 415 vs 407 (340 vs 319), 512 270 vs 275 (144 vs 145).
// 128 x 176 failed twice (sessions 12, 13: C7510 at a call, spills) before session 18 found why:
// a call left in the consumer's path (consume(), or operator() once consume() alone was forced
// inline); with both inlined it compiles clean (flash_fwd_kernel.h kInlineConsumer).
#pragma once

#include <cstdint>
#include <cstdlib>

#include "cuda/common/kernel_args.h"

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

// A wider key block for long key sequences (FlashAttention-3's non-causal 128 x 176 at hdim 128,
// 128 x 192 at hdim 96; fwd_launch.h use_long_tile): a key block's fixed cost (the O rescale, the
// barriers, the wgmma waits) spreads over more keys. hdim 128: Q + K + V = 32 + 88 + 88 = 208 KiB,
// so O goes through Q's tile; S + P + O = 88 + 44 + 64 registers of 240. hdim 96: 24 + 72 + 72 =
// 168 KiB plus O's own 24; 96 + 48 + 48 registers. 0 spills with the consumer inlined whole
// (flash_fwd_kernel.h kInlineConsumer); 128 x 192 at hdim 128 spills. {0, 0, 0}: none.
// hdim 128, 128 x 176 against 128 x 128 (H100, 2026-11-25, flashlab bench, kernel TFLOP/s, 16k
// tokens): 16k 702-706 vs 619-669 (causal 688 vs 663), 8k 675-678 vs 660 (causal 621 vs 605),
// 4k 641-643 vs 636-638 (causal 547 vs 551), 2k 602 vs 619 (causal 456 vs 495), 1k 516 vs 565.
// hdim 96, 128 x 192 / 128 x 176 / 128 x 128 (H200, same day and command): 16k 627 / 584 / 566 and
// 598 / 600 / 601 (causal 615 / 604 / 595), 8k 609 / 599 / 588 (causal 551 / 538 / 537), 4k
// 560 / 552 / 561 (causal 475 / 462 / 477), 2k 537 / 533 / 546, 1k 442 / 463 / 488.
// Short key sequences lose: the per-tile prologue and the diagonal's waste grow with the block,
// and persistent CTAs there gain from O's own staging tile. Causal gains as non-causal does; a
// sliding window keeps 128 x 128 (not measured).
constexpr FwdTileSize fwd_long_tile_size(int head_dim) {
  return head_dim > 64 && head_dim <= 96    ? FwdTileSize{128, 192, 2}
         : head_dim > 96 && head_dim <= 128 ? FwdTileSize{128, 176, 2}
                                            : FwdTileSize{0, 0, 0};
}
constexpr int kLongTileMinSeqlenK = 4097;
// Varlen (cu_seqlens) forwards: up to this head dim the consumers zero V's neighbour rows
// (mainloop_fwd.h zero_v_rows); above it warps 1-3 of the producer warpgroup do
// (flash_fwd_kernel.h, zero_v_helper): at 256 the consumers' zeroing made ptxas spill 4 bytes
// wherever it was placed (nvcc 13.0).
// StreamingLLM sink tokens (the forward's kSinks kernels, fwd_launch.h): hdim 64's 128 x 128 (two
// consumer warpgroups: varlen too), the default tile up to 128, and 128 x 96 at 192 with a wider
// producer (flash_fwd_kernel.h kWideProducer; 128 x 112 spilled 8 bytes, then 12 with it). Up to
// head dim 192: at 256 every variant tried spilled (nvcc 13.0; 128 x 80 76 bytes, 128 x 64 4,
// 128 x 48 12, 40 / 232 registers 24 and more; in the consumers: 4 bytes remain with the
// producer's and the helper's walks compiled out), so api_sm90.cpp leaves them beside a left
// window to cuda_sm80 (without one they change no mask: the plain kernels run the call).
constexpr FwdTileSize fwd_sinks_tile_size(int head_dim) {
  return head_dim > 32 && head_dim <= 64    ? fwd_short_tile_size(head_dim)
         : head_dim > 128 && head_dim <= 192 ? FwdTileSize{128, 96, 2}
                                             : fwd_tile_size(head_dim);
}
constexpr int kMaxSinkTokensHeadDim = 192;

// Whether a tile (default, short or long) also has its kernel without softcap and ALiBi code
// (fwd_launch.h launch_tile; common::ScoreVariant's kScoreMods): every tile but two, where that
// kernel spilled (nvcc 13.0) — hdim 64's 192 x 128, the three-consumer-warpgroup tile (4 bytes,
// 160 registers a consumer thread), and hdim 256's 128 x 80 (24 bytes).
constexpr bool fwd_has_plain_kernel(int head_dim, FwdTileSize tile) { return head_dim <= 192 && tile.block_m != 192; }
constexpr int kMaxConsumerZeroingHeadDim = 192;  // 4096 keys: a tie non-causal, -1 to -3 % causal

// How a call's tiles differ in work, from its mask and lengths (the scheduling rules below).
struct FwdWorkShape {
  bool fixed;      // fixed lengths (no cu_seqlens)
  bool no_left;    // no left window edge
  bool same_work;  // every tile visits the same key blocks: fixed lengths, no mask at all
};
inline FwdWorkShape fwd_work_shape(const common::FwdArguments& a) {
  const bool fixed = a.seq.cu_seqlens_q == nullptr && a.seq.cu_seqlens_k == nullptr;
  const bool no_left = a.score.window_left < 0;
  return {fixed, no_left, fixed && no_left && a.score.window_right < 0};
}

// The dynamic tile scheduler (common::PersistentFwdTileScheduler with a counter; fwd_launch.h):
// one CTA per SM, each taking the next tile from a global counter when it is free, longest tiles
// first. For calls whose tiles differ in work (causal, or a right window alone), of fixed lengths
// and without a left window; its counter lives in the caller's forward workspace
// (kFwdTileCounterBytes, what forward_workspace_size() asks for those calls; each launch zeroes
// it). Without a workspace such a call runs the static rule below. Kernels up to head dim 128
// (flash_fwd_kernel.h kHandOver); the sink-token kernels never count (a left window). H200,
// session 41, causal forward time against the static rule, both in one library (docs/perf.md):
// hdim 128 1k 0.966, 2k 0.929, 4k 0.910, 8k 0.957, 16k 1.00; hdim 64 1k-2k 0.98-1.00, 4k
// 0.88-0.97, 16k 0.98; hdim 32 4k 0.966; hdim 96 4k 0.962.
constexpr int64_t kFwdTileCounterBytes = 16;
constexpr bool fwd_dynamic(FwdWorkShape w) { return !w.same_work && w.fixed && w.no_left; }
constexpr int kDynamicMaxHeadDim = 128;  // the kernels that can count (flash_fwd_kernel.h kHandOver)
// The launch counts only where a tile visits more than this many key blocks: at 4 key blocks (512
// keys) the counter ran 1.00-1.02 of static waves (H200, session 41): short tiles, where the
// producer's wait for the next tile's index shows.
constexpr int kDynamicMinKeyBlocks = 5;
// A call's tiles and key blocks for a tile shape (the scheduling rules' inputs).
struct FwdTileCounts {
  int64_t key_blocks;  // of the longest key sequence
  int64_t tiles;       // query blocks x heads_q x batch
};
inline FwdTileCounts fwd_tile_counts(const common::SeqArgs& q, int block_m, int block_n) {
  return {(int64_t(q.seqlen_k) + block_n - 1) / block_n, (int64_t(q.seqlen_q) + block_m - 1) / block_m * q.heads_q * q.batch};
}
// Whether a call counts its tiles, for the head-dim bucket and a tile shape: the rule of
// forward_workspace_size() (api_sm90.cpp, with 128 x 128: every tile up to head dim 128 has 128
// keys but the long ones, which start at 4097 keys, and 128 or 192 rows) and of the launch
// (fwd_launch.h fwd_schedule, with the tile's own). Only with more tiles than SMs: one wave has
// nothing to balance and pays the counter's memset (H200, session 41: hdim 128 causal 1k, 128
// tiles, counted 0.0238 ms against 0.0229; sm_count <= 0: unknown, not checked).
// FLASHLAB_SM90_FWD_DYNAMIC=0 turns it off, =1 on wherever the kernel can count (short key
// sequences and single waves too: the tests). getenv: well under a microsecond.
inline bool fwd_counts_tiles(const common::FwdArguments& a, int head_dim_bucket, int block_m, int block_n,
                             int sm_count) {
  if (!fwd_dynamic(fwd_work_shape(a)) || head_dim_bucket > kDynamicMaxHeadDim) return false;
  const char* knob = std::getenv("FLASHLAB_SM90_FWD_DYNAMIC");
  const char want = knob != nullptr ? knob[0] : '\0';
  if (want == '0' || want == '1') return want == '1';
  const FwdTileCounts n = fwd_tile_counts(a.seq, block_m, block_n);
  return n.key_blocks >= kDynamicMinKeyBlocks && (sm_count <= 0 || n.tiles > sm_count);
}
// The dynamic order's L2 groups (common::grouped_tile_coords): as many (head, sequence) pairs as
// have K and V within this many bytes (FlashAttention-3's choice for a 50 MB L2).
constexpr int64_t kFwdL2GroupBytes = int64_t(32) << 20;
inline int fwd_l2_group(const common::FwdArguments& a, int head_dim, int element_bytes) {
  const int64_t kv_group = a.in.kv_group > 0 ? a.in.kv_group : 1;
  const int64_t pair_bytes = int64_t(a.seq.seqlen_k) * head_dim * 2 * element_bytes / kv_group;
  const int64_t pairs = int64_t(a.seq.heads_q) * a.seq.batch;
  const int64_t group = pair_bytes > 0 ? kFwdL2GroupBytes / pair_bytes : pairs;
  return static_cast<int>(group < 1 ? 1 : group > pairs ? pairs : group);
}

// Static scheduling (no counter): persistent CTAs (one per SM, static waves: common::wave_tile) or
// one CTA per tile, the rule of fwd_launch.h fwd_schedule. Persistent CTAs hide a tile's prologue
// and epilogue (the Q load's latency, O's stores) behind the neighbouring tiles' products; one CTA
// per tile lets the hardware hand the next tile to whichever SM frees first, which balances tiles
// of unequal length (causal) better than static waves. Persistent where
//   - every tile has the same work (same_work: no causal mask, no window, fixed lengths): static
//     waves are then as balanced (H200, session 31: hdim 128 4k +2.8 %, 8k +0.5 %, hdim 64 16k +2 %);
//   - a tile visits at most 16 key blocks (short key sequences: the prologue and epilogue dominate);
//   - a causal call without a window and of fixed lengths (causal_fixed) with short tiles,
//     seqlen_k · head_dim <= 2^18, and at least 16 waves of tiles, enough to balance them.
// H200, session 40, causal calls forced both ways (docs/perf.md): the third case 0.936-0.981 of one
// tile per CTA (hdim 64 3k / 4k, hdim 32 4k, hdim 96 2.5k), a tie at hdim 32 8k; outside every case
// persistent lost 1.02-1.51 (hdim 64 4k with 11 waves of tiles: 1.26; every head dim at 8k-16k).
constexpr int kPersistentMaxKeyBlocks = 16;                  // 2048 keys at block_n 128
constexpr int64_t kPersistentCausalWork = int64_t(1) << 18;  // seqlen_k x head_dim: 2048 x 128
constexpr int kPersistentCausalWaves = 16;
constexpr bool fwd_persistent(bool same_work, bool causal_fixed, int64_t seqlen_k, int64_t key_blocks, int64_t tiles,
                              int head_dim, int sm_count) {
  return same_work || key_blocks <= kPersistentMaxKeyBlocks ||
         (causal_fixed && seqlen_k * head_dim <= kPersistentCausalWork &&
          tiles >= int64_t(kPersistentCausalWaves) * sm_count);
}

}  // namespace sm90
}  // namespace flashlab
