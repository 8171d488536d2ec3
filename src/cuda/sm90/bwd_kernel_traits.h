// src/cuda/sm90/bwd_kernel_traits.h — the CuTe types of one Hopper backward instantiation.
//
// One CTA = one key block of kBlockN = 128 keys of one query head (FlashAttention-2's outer loop,
// as sm80's backward). Two consumer warpgroups split the key block: warpgroup w owns keys
// [64w, 64w + 64) of it, and for each query block of M = kBlockM rows (64; 128 at D <= 64, below)
// computes (per warpgroup, M × N × K), with the keys as the rows of the score tile ("orientation
// B", FlashAttention-3's SdP_swapAB):
//   product        shape           A                          B                          kind
//   Sᵀ  = K·Qᵀ     64 × M × D      K_w (64, D) smem, K-major  Q (M, D) smem, K-major       SS
//   dPᵀ = V·dOᵀ    64 × M × D      V_w (64, D) smem           dO (M, D) smem               SS
//   dV += Pᵀ·dO    64 × D × M      Pᵀ from registers          dOᵀ view (D, M), MN-major    RS
//   dK += dSᵀ·Q    64 × D × M      dSᵀ from registers         Qᵀ view (D, M), MN-major     RS
// and dQ = dS·K from shared memory (dSᵀ is stored with the queries contiguous, so dS is its
// MN-major view), one of two ways (kDqSplit):
//   split (D 128)  dQ[:, half w] = dS·K[:, half w]    M × D/2 × 128    both warpgroups' keys (a
//                  barrier over both first); Kᵀ view (D/2, 128), MN-major                  SS
//   per warpgroup  dQ_w = dS_w·K_w                    M × D × 64       (D 64, 96: D/2 is not a
//                  whole swizzle atom of Kᵀ)          K_wᵀ view (D, 64)                    SS
// Split, each CTA adds M × D floats of dQ per query block to global memory; per warpgroup, twice
// that (both warpgroups add a full M × D partial sum), and the dQ accumulator is twice as large.
// Why M = 128 at D <= 64: every product above has half the work of D 128's at the same M, while a
// query block's fixed costs (the pipeline wait, the dS barrier, each wgmma batch's latency, the dQ
// hand-over) stay; 128 queries per block halve the blocks and double each wgmma's N (Sᵀ, dPᵀ) or K
// (dV, dK). Registers at D 64 (fp32 per consumer thread): Sᵀ + dPᵀ 64 + 64, dK + dV 32 + 32, and
// later Pᵀ, dSᵀ (16-bit) 32 + 32 with dQ 64 — the same peaks as D 128 at M = 64. FlashAttention-3
// uses 128 × 128 tiles at D 64 too.
// Sᵀ's accumulator gives a thread 2 keys × 16 queries, so the per-query LSE and D come from shared
// memory (ScoreVariant::p_and_ds_transposed). P never leaves the registers: the 16-bit Pᵀ and dSᵀ
// are the A operands of dV and dK as they are (the forward's P·V trick). Every transposed operand
// is the same bytes under a transposed layout (composition), as the forward's Vᵀ.
//
// Head dim 256 ("wide", kWide): a warpgroup cannot hold dK and dV of 64 keys × 256 (256 fp32
// registers), so the CTA takes kBlockN = 64 keys and the warpgroups split the other dimensions:
//   product        shape (per WG)   A                          B                          kind
//   Sᵀ  = K·Q_wᵀ   64 × 32 × D      K (64, D) smem             Q rows [32w, +32) smem      SS
//   dPᵀ = V·dO_wᵀ  64 × 32 × D      V (64, D) smem             dO rows [32w, +32) smem     SS
//   dV[:, half w] += Pᵀ·dO[:, half w]   64 × D/2 × 64   Pᵀ (64, 64) smem   dOᵀ half, MN-major  SS
//   dK[:, half w] += dSᵀ·Q[:, half w]   64 × D/2 × 64   dSᵀ (64, 64) smem  Qᵀ half, MN-major   SS
//   dQ[:, half w]  = dS·K[:, half w]    64 × D/2 × 64   (the split dQ above, over the 64 keys)
// Both warpgroups write their 32 queries of Pᵀ and dSᵀ (16-bit) to shared memory, double-buffered
// by query block, and every product after the barrier reads both halves. Registers per consumer
// thread: dK + dV 64 + 64, Sᵀ + dPᵀ 16 + 16, dQ 64 (192 while dK, dV and dQ run). dQ has no
// shared buffer of its own (64 KiB do not fit beside two Q / dO stages: 225 KiB without it): once
// warpgroup w's dK and dV retired, its halves of the stage's Q and dO (columns [128w, +128)) are
// free, and its dQ slab goes there for the writer warp's bulk reduce-add; the stage is refilled
// after the writer read it (flash_bwd_kernel.h, write_dq_wide; the deterministic mode adds each
// half in the CTA's turn there, as the other head dims' writer does).
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>

#include <cutlass/numeric_types.h>
#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>

#include "cuda/sm90/kernel_traits.h"  // smem_atom_k_major

namespace flashlab {
namespace sm90 {

using namespace cute;

// The query block: 128 rows at D <= 64 (above), else 64. bwd_launch.h takes 64 for the softcap /
// ALiBi kernels at every D: their score math needs more registers, and at 128 rows they spilled
// (48 to 64 bytes at D 64, ptxas).
constexpr int bwd_block_m(int head_dim) { return head_dim <= 64 ? 128 : 64; }

// kBucket_: the head-dim bucket served (common::head_dim_bucket), which sizes dq_accum's tiles
// (kBlockM × kBucket floats, common/bwd_workspace.h). It is kHeadDim except for bucket 192, which
// runs the D 256 layout (BwdTraitsFor below).
template <int kHeadDim_, typename Element_, int kBlockM_ = bwd_block_m(kHeadDim_), int kBucket_ = kHeadDim_>
struct BwdTraits {
  using Element = Element_;
  using ElementAccum = float;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBucket = kBucket_;
  static_assert(kBucket == kHeadDim || (kBucket == 192 && kHeadDim == 256), "bucket 192 runs the D 256 layout");
  // Bucket 192 on the D 256 layout: dq_accum's tile ends after the first half of slab 1 (columns
  // [128, 192)); the second half, columns [192, 256), is zero and has no place in it.
  static constexpr bool kDqTileDropsLastHalfSlab = kBucket != kHeadDim;
  static constexpr bool kWide = kHeadDim > 128;  // D 256: the layout of the file comment's second table
  static constexpr int kBlockM = kBlockM_;  // query rows per step of the loop
  static_assert(kBlockM == 64 || (kBlockM == 128 && kHeadDim <= 64), "registers: 128 rows only at D <= 64");
  static constexpr int kBlockN = kWide ? 64 : 128;  // keys per CTA
  static constexpr int kStages = 2;  // Q and dO buffers each (3 measured: no gain, H100 2026-11-24)
  static constexpr int kMmaWarpGroups = 2;
  // The (keys, queries) of a warpgroup's Sᵀ and dPᵀ (keys: one wgmma M of 64) and the columns of
  // its dK and dV.
  static constexpr int kKeysPerWarpGroup = kWide ? kBlockN : kBlockN / kMmaWarpGroups;
  static constexpr int kQueriesPerWarpGroup = kWide ? kBlockM / kMmaWarpGroups : kBlockM;
  static constexpr int kDkvCols = kWide ? kHeadDim / kMmaWarpGroups : kHeadDim;
  static constexpr int kMmaThreads = kMmaWarpGroups * cutlass::NumThreadsPerWarpGroup;
  static constexpr int kThreads = kMmaThreads + cutlass::NumThreadsPerWarpGroup;
  // setmaxnreg, the forward's rule (kernel_traits.h): 24 + 2 x 240 = 504 <= 504 = 3 x 168. The
  // producer warpgroup holds the TMA producer and the dQ writer warp (24 registers: 0 spills since
  // every consumer thread releases the stage itself; with the warpgroup barrier before a one-thread
  // release, 24 spilled 4 bytes in the kGeneral kernels and the split was 32 / 232).
  static constexpr int kEntryRegs = (65536 / kThreads) / 8 * 8;
  // D 256: 32 / 232. Its dQ writer warp (flash_bwd_kernel.h, write_dq_wide) spilled 8 bytes at 24.
  static constexpr int kProducerRegs = kWide ? 32 : 24;
  static constexpr int kConsumerRegs = kWide ? 232 : 240;
  static_assert(kProducerRegs + kMmaWarpGroups * kConsumerRegs <= kEntryRegs * (1 + kMmaWarpGroups),
                "setmaxnreg would ask for more registers than the launch allocated (a hang)");
  // dSᵀ (and D 256's Pᵀ) to shared memory by stmatrix rather than 4-byte stores. Same-call A/B on
  // the H100 (tools/ab_libs.py, docs/perf.md session 13): D 64 3-11 % faster, D 256 2-2.5 %, D 128
  // alone 4 % slower at 16k non-causal and neutral elsewhere. D 128 takes it together with
  // kUniformWarpGroup (session 27, H200, tools/ab_libs.py both orders: 0.6-3 % faster at 8 of 10
  // points and at 16k non-causal +0.6 % in the second run). D 96 was not measured.
  static constexpr bool kStsmDs = kHeadDim <= 64 || kHeadDim == 128 || kWide;
  // The consumer warpgroup's index as a warp-uniform value (flash_bwd_kernel.h, consume): the
  // wgmma descriptors then stay in uniform registers. Same-call CLI A/B on the H100, three reps
  // (perf.md, session 19): D 96 +7 to +11 % (16k, 8k causal, 2k), D 128 alone 1-2 % slower, D 64
  // and D 256 mixed within noise. D 96, and D 128 with stmatrix (above).
  static constexpr bool kUniformWarpGroup = kHeadDim == 96 || kHeadDim == 128;
  // dQ split across the warpgroups along the head dim where each half is whole swizzle atoms.
  static constexpr bool kDqSplit = (kHeadDim / 2) % 64 == 0;
  static constexpr int kDqCols = kDqSplit ? kHeadDim / 2 : kHeadDim;  // dQ columns per warpgroup
  static constexpr int kDqSlabs = kDqSplit ? 2 : 1;   // (kBlockM, kDqCols) fragments per dq_accum tile
  static constexpr int kDsStages = kDqSplit ? 2 : 1;  // dS read by both warpgroups: double-buffered
  // dQ's K extent: all 128 keys (split) or the warpgroup's 64.
  static constexpr int kDqKeys = kDqSplit ? kBlockN : kKeysPerWarpGroup;
  // Registers per consumer thread (fp32): dK + dV = 2 · 64·D/128, Sᵀ + dPᵀ = 2 · 64·M/128, dQ =
  // M·kDqCols/128; Pᵀ and dSᵀ in 16 bits (2 · M/4) stay live until dV and dK retire. D 128 (M 64):
  // 128 + 64 live in p_and_ds, 128 + 32 + 32 while dQ, dV and dK run; D 64 (M 128): 64 + 128,
  // then 64 + 64 + 64.
  static_assert(kHeadDim % 16 == 0 && (kHeadDim <= 128 || kHeadDim == 256),
                "the Hopper backward serves head dims <= 128 and 256");
  static_assert(!kWide || kDqSplit, "D 256 splits dQ by halves of the head dim");
  static_assert(sizeof(Element) == 2, "the GMMA atoms below take 16-bit inputs");

  using OneWarpGroup = Layout<Shape<_1, _1, _1>>;
  using TiledMmaSdP = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, ElementAccum,
                           Shape<Int<kKeysPerWarpGroup>, Int<kQueriesPerWarpGroup>, Int<kHeadDim>>>(),
      OneWarpGroup{}));
  // dK, dV: A = Pᵀ / dSᵀ from registers (RS), or at D 256 from shared memory (SS, K-major there).
  using TiledMmadKV = decltype(make_tiled_mma(
      std::conditional_t<kWide,
                         decltype(GMMA::ss_op_selector<Element, Element, ElementAccum,
                                                       Shape<_64, Int<kDkvCols>, Int<kBlockM>>, GMMA::Major::K,
                                                       GMMA::Major::MN>()),
                         decltype(GMMA::rs_op_selector<Element, Element, ElementAccum,
                                                       Shape<_64, Int<kDkvCols>, Int<kBlockM>>, GMMA::Major::K,
                                                       GMMA::Major::MN>())>{},
      OneWarpGroup{}));
  using TiledMmadQ = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, ElementAccum, Shape<_64, Int<kDqCols>, Int<kDqKeys>>,
                           GMMA::Major::MN, GMMA::Major::MN>(),
      OneWarpGroup{}));

  // ---- Shared memory, K-major as TMA writes it / as the accumulator stores write it; the
  // transposed views below read the same bytes. Warpgroup w's part of K, V and dSᵀ is rows
  // [64w, 64w + 64): local_tile of these.
  using SmemAtom = decltype(smem_atom_k_major<Element, kHeadDim>());
  using SmemLayoutQ = decltype(tile_to_shape(SmemAtom{}, Shape<Int<kBlockM>, Int<kHeadDim>, Int<kStages>>{}));
  using SmemLayoutK =
      decltype(tile_to_shape(SmemAtom{}, Shape<Int<kBlockN>, Int<kHeadDim>>{}));  // (BLK_N, HDIM)
  // (BLK_N, BLK_M, DS_STAGES): dSᵀ as the Sᵀ accumulator stores it, queries contiguous.
  using SmemLayoutdSt = decltype(tile_to_shape(smem_atom_k_major<Element, kBlockM>(),
                                               Shape<Int<kBlockN>, Int<kBlockM>, Int<kDsStages>>{}));
  // D 256: Pᵀ as well, the A operand of dV (the same layout as dSᵀ).
  using SmemLayoutPt = SmemLayoutdSt;
  // (BLK_M, BLK_N, DS_STAGES): dS, the A operand of dQ (MN-major).
  using SmemLayoutdS = decltype(composition(
      SmemLayoutdSt{},
      make_ordered_layout(Shape<Int<kBlockM>, Int<kBlockN>, Int<kDsStages>>{}, Step<_2, _1, _3>{})));
  // (HDIM, BLK_M, STAGES): Qᵀ and dOᵀ, the B operands of dK and dV.
  using SmemLayoutQt = decltype(composition(
      SmemLayoutQ{},
      make_ordered_layout(Shape<Int<kHeadDim>, Int<kBlockM>, Int<kStages>>{}, Step<_2, _1, _3>{})));
  // (HDIM, BLK_N): Kᵀ, the B operand of dQ.
  using SmemLayoutKt = decltype(composition(
      SmemLayoutK{}, make_ordered_layout(Shape<Int<kHeadDim>, Int<kBlockN>>{}, Step<_2, _1>{})));

  // ---- TMA: global tensors (seqlen, d, head, batch), head dim contiguous. Q and dO: one (BLK_M, HDIM)
  // box per stage; K and V: one (BLK_N, HDIM) box each.
  using ShapeQKV = Shape<int32_t, int32_t, int32_t, int32_t>;
  using StrideQKV = Stride<int64_t, _1, int64_t, int64_t>;
  using GmemTensor =
      decltype(make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)), ShapeQKV{}, StrideQKV{}));
  using TileQ = Shape<Int<kBlockM>, Int<kHeadDim>>;
  using TileKV = Shape<Int<kBlockN>, Int<kHeadDim>>;
  using TmaQ =
      decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, take<0, 2>(SmemLayoutQ{}), TileQ{}, _1{}));
  using TmaKV = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, SmemLayoutK{}, TileKV{}, _1{}));
  static constexpr uint32_t kTmaBytesQ = static_cast<uint32_t>(kBlockM * kHeadDim * sizeof(Element));
  static constexpr uint32_t kTmaBytesKV = static_cast<uint32_t>(kBlockN * kHeadDim * sizeof(Element));
};

// The traits of head-dim bucket kBucket. Bucket 192 (head dims 129..192) runs the D 256 layout: its
// 96-column halves of the head dim would not be whole 128-byte swizzle atoms (the split dK, dV, dQ
// of kWide need that), and dK + dV of 64 keys × 192 do not fit a warpgroup's registers. TMA fills
// the columns past the call's head_dim with zeros, so they add nothing; dq_accum's tile keeps 192
// columns (the writer skips the last 64, which are zero: flash_bwd_kernel.h write_dq_wide). The
// price is the padded products: 256 / 192 of bucket 192's work at head dim 192.
template <int kBucket, typename Element, int kBlockM = bwd_block_m(kBucket)>
using BwdTraitsFor = BwdTraits<kBucket == 192 ? 256 : kBucket, Element, kBlockM, kBucket>;

}  // namespace sm90
}  // namespace flashlab
