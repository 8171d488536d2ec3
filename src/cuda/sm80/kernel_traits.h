// src/cuda/sm80/kernel_traits.h — the CuTe types of one forward instantiation.
//
// What replaces what in learn/kernels/forward_v4.cu:
//   v4 hand-written mma.sync + fragment indexing   -> TiledMma: an SM80 16x8x16 MMA atom tiled over
//                                                     the warps; CuTe partitions every operand.
//   v4 swz(r, c) = chunk c ^ (r % 8)               -> SmemLayout*: Swizzle<B,3,3> composed with an
//                                                     (8, 64) atom, tiled to the whole tile.
//   v4 issue_tile() loops of cp_async_16           -> GmemTiledCopy: a cp.async atom of 16 bytes
//                                                     tiled over the threads (8 per 64 columns).
//   v4 ldmatrix / ldmatrix.trans wrappers          -> SmemCopyAtom / SmemCopyAtomTransposed (LDSM),
//                                                     tiled to match the MMA operand layouts.
#pragma once

#include <cute/tensor.hpp>

#include <cutlass/numeric_types.h>

namespace flashlab {
namespace sm80 {

using namespace cute;

template <int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_, typename Element_>
struct FwdKernelTraits {
  using Element = Element_;  // cutlass::bfloat16_t or cutlass::half_t
  using ElementAccum = float;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kNWarps = kNWarps_;
  static constexpr int kNThreads = kNWarps * 32;

  static_assert(kHeadDim % 32 == 0 && kHeadDim <= 256, "head-dim buckets are multiples of 32 up to 256");
  static_assert(kBlockM % (16 * kNWarps) == 0, "each warp owns whole 16-row MMA tiles");
  static_assert(kBlockN % 16 == 0, "P·V consumes keys in k-steps of 16");
  static_assert(sizeof(Element) == 2, "the SM80 MMA atoms below take 16-bit inputs");

  // ---- MMA: warps stacked along M, each issuing m16n8k16 (fp32 accumulators). The N extent of
  // the tile is 16 so that one ldmatrix.x4 feeds the B operand of two n8 MMAs.
  using MmaAtom = MMA_Atom<std::conditional_t<std::is_same_v<Element, cutlass::half_t>,
                                              SM80_16x8x16_F32F16F16F32_TN, SM80_16x8x16_F32BF16BF16F32_TN>>;
  using TiledMma = TiledMMA<MmaAtom, Layout<Shape<Int<kNWarps>, _1, _1>>, Tile<Int<16 * kNWarps>, _16, _16>>;

  // ---- Shared memory. A swizzle atom is 8 rows of kBlockKSmem columns (128 B per row when 64):
  // Swizzle<3,3,3> XORs the 16-byte chunk index with the row (mod 8), so the 8 row addresses of an
  // ldmatrix land in 8 different bank groups. Head dims 32 and 96 use a 32-column atom (64 B
  // rows): Swizzle<2,3,3> pairs two rows per 128 B line and still gives 8 bank groups.
  static constexpr int kBlockKSmem = kHeadDim % 64 == 0 ? 64 : 32;
  static constexpr int kSwizzleBits = kBlockKSmem == 64 ? 3 : 2;
  using SmemLayoutAtom = decltype(composition(
      Swizzle<kSwizzleBits, 3, 3>{}, Layout<Shape<_8, Int<kBlockKSmem>>, Stride<Int<kBlockKSmem>, _1>>{}));
  using SmemLayoutQ =
      decltype(tile_to_shape(SmemLayoutAtom{}, Shape<Int<kBlockM>, Int<kHeadDim>>{}));  // (BLK_M, HDIM)
  using SmemLayoutKV =
      decltype(tile_to_shape(SmemLayoutAtom{}, Shape<Int<kBlockN>, Int<kHeadDim>>{}));  // (BLK_N, HDIM)
  // V read as the B operand of P·V, i.e. transposed: the same bytes seen as (HDIM, BLK_N).
  using SmemLayoutVt = decltype(composition(
      SmemLayoutKV{}, make_layout(Shape<Int<kHeadDim>, Int<kBlockN>>{}, GenRowMajor{})));  // (HDIM, BLK_N)
  using SmemLayoutVtNoSwizzle =
      decltype(get_nonswizzle_portion(SmemLayoutVt{}));  // (HDIM, BLK_N), for fragment shapes
  using SmemLayoutO = SmemLayoutQ;                       // O is staged where Q was (same shape and swizzle)

  static constexpr int kSmemQBytes = int(cosize(SmemLayoutQ{})) * int(sizeof(Element));
  static constexpr int kSmemKVBytes = int(cosize(SmemLayoutKV{})) * int(sizeof(Element));
  static constexpr int kSmemBytes = kSmemQBytes + 2 * kSmemKVBytes;  // Q, one K tile, one V tile

  // ---- Shared -> registers for the MMA operands (ldmatrix). K is stored like Q (row = key,
  // contiguous head dim), which is exactly the B layout of a TN MMA; V must be transposed on the
  // way, which ldmatrix.trans does for free.
  using SmemCopyAtom = Copy_Atom<SM75_U32x4_LDSM_N, Element>;
  using SmemCopyAtomTransposed = Copy_Atom<SM75_U16x8_LDSM_T, Element>;

  // ---- Global <-> shared: 16 bytes (8 elements) per thread per copy; kGmemThreadsPerRow threads
  // cover one kBlockKSmem-wide row segment, the rest of the CTA covers further rows.
  static constexpr int kGmemElemsPerLoad = int(sizeof(cute::uint128_t) / sizeof(Element));
  static constexpr int kGmemThreadsPerRow = kBlockKSmem / kGmemElemsPerLoad;
  static_assert(kNThreads % kGmemThreadsPerRow == 0, "whole rows per copy step");
  using GmemLayoutAtom = Layout<Shape<Int<kNThreads / kGmemThreadsPerRow>, Int<kGmemThreadsPerRow>>,
                                Stride<Int<kGmemThreadsPerRow>, _1>>;
  // cp.async.cg: 16 bytes straight to shared memory, cached in L2 only (K and V are re-read by
  // other CTAs of the same head from L2, never from L1).
  using GmemTiledCopyQKV =
      decltype(make_tiled_copy(Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL<cute::uint128_t>, Element>{},
                               GmemLayoutAtom{}, Layout<Shape<_1, _8>>{}));
  using GmemTiledCopyO = decltype(make_tiled_copy(Copy_Atom<UniversalCopy<cute::uint128_t>, Element>{},
                                                  GmemLayoutAtom{}, Layout<Shape<_1, _8>>{}));

  // Rows of the S / O accumulators one thread holds: 2 per m16 tile (rows g and g + 8).
  static constexpr int kRowsPerThread = 2 * kBlockM / (16 * kNWarps);
};

}  // namespace sm80
}  // namespace flashlab
