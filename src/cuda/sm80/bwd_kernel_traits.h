// src/cuda/sm80/bwd_kernel_traits.h — the CuTe types of one backward instantiation.
//
// The forward (kernel_traits.h) has one product shape and keeps P in registers. The backward has
// three product shapes (bwd_tile_size.h) and needs P and dS *transposed* as A operands (dV = Pᵀ·dO,
// dK = dSᵀ·Q), which registers cannot give: P and dS go through shared memory, as in
// FlashAttention-2. Every transposed operand is the same bytes seen through a transposed layout
// and read with ldmatrix.trans (SmemCopyAtomTransposed):
//   product         A (rows × k)              B (cols × k)
//   S  = Q·Kᵀ       sQ   (BLK_M, HDIM)   N    sK   (BLK_N, HDIM)   N
//   dP = dO·Vᵀ      sdO  (BLK_M, HDIM)   N    sV   (BLK_N, HDIM)   N
//   dV += Pᵀ·dO     sPt  (BLK_N, BLK_M)  T    sdOt (HDIM, BLK_M)   T
//   dK += dSᵀ·Q     sdSt (BLK_N, BLK_M)  T    sQt  (HDIM, BLK_M)   T
//   dQ  = dS·K      sdS  (BLK_M, BLK_N)  N    sKt  (HDIM, BLK_N)   T
// (N: ldmatrix, the k index contiguous in memory; T: ldmatrix.trans.)
#pragma once

#include <cute/tensor.hpp>

#include <cutlass/numeric_types.h>

#include "cuda/sm80/bwd_tile_size.h"

namespace flashlab {
namespace sm80 {

using namespace cute;

// The swizzled (8, kCols) atom of a 16-bit tile whose rows are kCols elements wide (or wider):
// 64 columns (128 B rows) take Swizzle<3,3,3>, 32 columns Swizzle<2,3,3> (two rows per 128 B
// line), so the 8 row addresses of an ldmatrix hit 8 different bank groups (kernel_traits.h).
template <int kCols>
using BwdSmemAtom = decltype(composition(
    Swizzle<(kCols % 64 == 0 ? 3 : 2), 3, 3>{},
    Layout<Shape<_8, Int<(kCols % 64 == 0 ? 64 : 32)>>, Stride<Int<(kCols % 64 == 0 ? 64 : 32)>, _1>>{}));

// kTileSet: which of bwd_tile_size.h's sets (BwdTileSet: small, large, Hopper).
template <int kHeadDim_, typename Element_, BwdTileSet kTileSet_ = BwdTileSet::kSmall>
struct BwdKernelTraits {
  using Element = Element_;  // cutlass::bfloat16_t or cutlass::half_t
  using ElementAccum = float;
  static constexpr BwdTileSet kTileSet = kTileSet_;
  static constexpr BwdTileSize kTile = bwd_tile_size(kHeadDim_, kTileSet_);
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kTile.block_m;
  static constexpr int kBlockN = kTile.block_n;
  static constexpr int kNWarps = kTile.warps;
  static constexpr int kNThreads = kNWarps * 32;
  static constexpr int kStages = kTile.stages;

  static_assert(kHeadDim % 32 == 0 && kHeadDim <= 256, "head-dim buckets are multiples of 32 up to 256");
  static_assert(sizeof(Element) == 2, "the SM80 MMA atoms below take 16-bit inputs");
  static_assert(kStages == 1 || kStages == 2, "Q / dO are single- or double-buffered");

  // ---- MMAs: m16n8k16 with fp32 accumulators, warps in a 2-D grid per product, each warp tile
  // 16 × 16 (Tile<16·wm, 16·wn, 16>) so one ldmatrix.x4 feeds the A operand and two n8 B operands.
  using MmaAtom = MMA_Atom<std::conditional_t<std::is_same_v<Element, cutlass::half_t>,
                                              SM80_16x8x16_F32F16F16F32_TN, SM80_16x8x16_F32BF16BF16F32_TN>>;
  template <int kWarpsM>
  using TiledMmaWith = TiledMMA<MmaAtom, Layout<Shape<Int<kWarpsM>, Int<kNWarps / kWarpsM>, _1>>,
                                Tile<Int<16 * kWarpsM>, Int<16 * kNWarps / kWarpsM>, _16>>;
  using TiledMmaSdP = TiledMmaWith<kTile.atom_m_sdp>;  // C: (BLK_M, BLK_N)
  using TiledMmadKV = TiledMmaWith<kTile.atom_n_dkv>;  // C: (BLK_N, HDIM)
  using TiledMmadQ = TiledMmaWith<kTile.atom_m_dq>;    // C: (BLK_M, HDIM)
  static_assert(kNWarps % kTile.atom_m_sdp == 0 && kNWarps % kTile.atom_n_dkv == 0 &&
                    kNWarps % kTile.atom_m_dq == 0,
                "warp grids must use every warp");
  static_assert(kBlockM % (16 * kTile.atom_m_sdp) == 0 && kBlockN % (16 * kNWarps / kTile.atom_m_sdp) == 0,
                "S / dP: whole 16 x 16 warp tiles");
  static_assert(kBlockN % (16 * kTile.atom_n_dkv) == 0 && kHeadDim % (16 * kNWarps / kTile.atom_n_dkv) == 0,
                "dK / dV: whole 16 x 16 warp tiles");
  static_assert(kBlockM % (16 * kTile.atom_m_dq) == 0 && kHeadDim % (16 * kNWarps / kTile.atom_m_dq) == 0,
                "dQ: whole 16 x 16 warp tiles");

  // ---- Shared memory tiles and their transposed views.
  static constexpr int kBlockKSmem = kHeadDim % 64 == 0 ? 64 : 32;
  using SmemLayoutAtomQKV = BwdSmemAtom<kBlockKSmem>;
  using SmemLayoutQdO =
      decltype(tile_to_shape(SmemLayoutAtomQKV{}, Shape<Int<kBlockM>, Int<kHeadDim>>{}));  // (BLK_M, HDIM)
  using SmemLayoutKV =
      decltype(tile_to_shape(SmemLayoutAtomQKV{}, Shape<Int<kBlockN>, Int<kHeadDim>>{}));  // (BLK_N, HDIM)
  using SmemLayoutQdOt = decltype(composition(
      SmemLayoutQdO{}, make_layout(Shape<Int<kHeadDim>, Int<kBlockM>>{}, GenRowMajor{})));  // (HDIM, BLK_M)
  using SmemLayoutQdOtNoSwizzle = decltype(get_nonswizzle_portion(SmemLayoutQdOt{}));       // (HDIM, BLK_M)
  using SmemLayoutKt = decltype(composition(
      SmemLayoutKV{}, make_layout(Shape<Int<kHeadDim>, Int<kBlockN>>{}, GenRowMajor{})));  // (HDIM, BLK_N)
  using SmemLayoutKtNoSwizzle = decltype(get_nonswizzle_portion(SmemLayoutKt{}));          // (HDIM, BLK_N)

  using SmemLayoutPdS =
      decltype(tile_to_shape(BwdSmemAtom<kBlockN>{}, Shape<Int<kBlockM>, Int<kBlockN>>{}));  // (BLK_M, BLK_N)
  using SmemLayoutPdSt = decltype(composition(
      SmemLayoutPdS{}, make_layout(Shape<Int<kBlockN>, Int<kBlockM>>{}, GenRowMajor{})));  // (BLK_N, BLK_M)
  using SmemLayoutPdStNoSwizzle = decltype(get_nonswizzle_portion(SmemLayoutPdSt{}));      // (BLK_N, BLK_M)

  static constexpr int kSmemQdOBytes = int(cosize(SmemLayoutQdO{})) * int(sizeof(Element));  // one stage
  static constexpr int kSmemKVBytes = int(cosize(SmemLayoutKV{})) * int(sizeof(Element));
  static constexpr int kSmemPdSBytes = int(cosize(SmemLayoutPdS{})) * int(sizeof(Element));
  // Q stages, dO stages, K, V, P, dS (MainloopBwd::SharedStorage lays them out in this order).
  static constexpr int kSmemBytes = 2 * kStages * kSmemQdOBytes + 2 * kSmemKVBytes + 2 * kSmemPdSBytes;
  static_assert(kSmemBytes <= (kTileSet == BwdTileSet::kHopper  ? 227
                               : kTileSet == BwdTileSet::kLarge ? 163
                                                                : 99) *
                                  1024,
                "bwd_tile_size.h promises <= 99 KiB (small set) / 163 KiB (large set, A100's limit) / "
                "227 KiB (Hopper set, H100's limit)");

  // ---- Shared -> registers (ldmatrix / ldmatrix.trans), registers -> shared for P and dS (pairs
  // of adjacent columns: 32-bit stores).
  using SmemCopyAtom = Copy_Atom<SM75_U32x4_LDSM_N, Element>;
  using SmemCopyAtomTransposed = Copy_Atom<SM75_U16x8_LDSM_T, Element>;
  using SmemCopyAtomPdS = Copy_Atom<AutoVectorizingCopyWithAssumedAlignment<128>, Element>;

  // ---- Global -> shared: 16-byte cp.async, kGmemThreadsPerRow threads per kBlockKSmem columns.
  static constexpr int kGmemElemsPerLoad = int(sizeof(cute::uint128_t) / sizeof(Element));
  static constexpr int kGmemThreadsPerRow = kBlockKSmem / kGmemElemsPerLoad;
  static constexpr int kGmemRowsPerCopy = kNThreads / kGmemThreadsPerRow;
  static_assert(kNThreads % kGmemThreadsPerRow == 0, "whole rows per copy step");
  static_assert(kBlockM % kGmemRowsPerCopy == 0 && kBlockN % kGmemRowsPerCopy == 0,
                "the copy tiles whole Q / K blocks");
  using GmemLayoutAtom =
      Layout<Shape<Int<kGmemRowsPerCopy>, Int<kGmemThreadsPerRow>>, Stride<Int<kGmemThreadsPerRow>, _1>>;
  using GmemTiledCopyQKV =
      decltype(make_tiled_copy(Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL<cute::uint128_t>, Element>{},
                               GmemLayoutAtom{}, Layout<Shape<_1, _8>>{}));
  // Shared -> global, 16 bytes per thread: dK, dV and dQ leave through shared memory (tile_store.h).
  using GmemTiledCopyStore = decltype(make_tiled_copy(Copy_Atom<UniversalCopy<cute::uint128_t>, Element>{},
                                                      GmemLayoutAtom{}, Layout<Shape<_1, _8>>{}));

  // Rows of the S / dP accumulators one thread holds (2 per m16 tile it covers).
  static constexpr int kRowsPerThread = 2 * kBlockM / (16 * kTile.atom_m_sdp);
};

}  // namespace sm80
}  // namespace flashlab
