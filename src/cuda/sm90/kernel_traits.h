// src/cuda/sm90/kernel_traits.h — the CuTe types of one Hopper forward instantiation.
//
// What replaces what, coming from sm80/kernel_traits.h:
//   sm80 cp.async GmemTiledCopy (every thread)     -> TMA descriptors (TmaQ, TmaKV): one elected
//                                                     thread of the producer warp moves whole tiles
//   sm80 SM80_16x8x16 TiledMma over 4 warps        -> wgmma: a 64 x N x 16 GMMA atom per consumer
//                                                     warpgroup, kBlockM / 64 warpgroups along M
//   sm80 Swizzle<3,3,3> atom + ldmatrix            -> GMMA::Layout_K_SW{128,64,32}_Atom: the
//                                                     swizzles TMA writes and wgmma reads directly
// Q·Kᵀ reads both operands from shared memory (SS); P·V reads P from registers (RS: the S
// accumulator re-viewed, fragments.h) and V from shared memory, transposed by the layout alone.
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>

#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cutlass/numeric_types.h>

namespace flashlab {
namespace sm90 {

using namespace cute;

// The widest swizzle whose atom divides the head dim: 128-byte rows (64 16-bit elements) when
// they fit, else 64 (hdim 32, 96) or 32 bytes. TMA and wgmma both accept all three; a wider
// swizzle spreads a row's 16-byte chunks over more banks.
template <typename Element, int kHeadDim>
constexpr auto smem_atom_k_major() {
  if constexpr (kHeadDim % 64 == 0) {
    return GMMA::Layout_K_SW128_Atom<Element>{};
  } else if constexpr (kHeadDim % 32 == 0) {
    return GMMA::Layout_K_SW64_Atom<Element>{};
  } else {
    return GMMA::Layout_K_SW32_Atom<Element>{};
  }
}

// TMA needs every non-unit stride to be a multiple of 16 bytes below 2^40 (api_sm90.cpp checks
// the caller's); a dimension of extent 1 never uses its stride, so any legal one stands in.
inline int64_t tma_legal_stride(int64_t stride, int extent) {
  return extent == 1 ? 8 : stride;
}

template <int kHeadDim_, int kBlockM_, int kBlockN_, int kStages_, typename Element_>
struct FwdTraits {
  using Element = Element_;  // cutlass::bfloat16_t or cutlass::half_t
  using ElementAccum = float;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;  // K and V buffers each

  // One producer warpgroup + one consumer warpgroup per 64 query rows.
  static constexpr int kMmaWarpGroups = kBlockM / 64;
  static constexpr int kMmaThreads = kMmaWarpGroups * cutlass::NumThreadsPerWarpGroup;
  static constexpr int kThreads = kMmaThreads + cutlass::NumThreadsPerWarpGroup;
  static constexpr int kRowsPerThread = 2;  // of the m64 wgmma accumulator: rows t/4 and t/4 + 8 of a warp's 16
  // setmaxnreg: the producer gives registers to the consumers. setmaxnreg.inc waits until the
  // CTA's pool has the registers, and the pool is what the launch allocated: the entry cap
  // (65536 / threads, rounded down to 8: 168 for 384 threads) times the warpgroups. Asking for
  // more hangs the consumers forever (found on the H100: 32 + 2 x 240 = 512 > 3 x 168 = 504).
  // FlashAttention-3's split: 24 + 2 x 240 = 504 and 32 + 3 x 160 = 512 = 4 x 128.
  static constexpr int kEntryRegs = (65536 / kThreads) / 8 * 8;
  static constexpr int kProducerRegs = kMmaWarpGroups == 2 ? 24 : 32;
  static constexpr int kConsumerRegs = kMmaWarpGroups == 2 ? 240 : 160;
  static_assert(kProducerRegs + kMmaWarpGroups * kConsumerRegs <= kEntryRegs * (1 + kMmaWarpGroups),
                "setmaxnreg would ask for more registers than the launch allocated (a hang)");

  static_assert(kBlockM % 64 == 0 && kMmaWarpGroups >= 2 && kMmaWarpGroups <= 3,
                "two or three consumer warpgroups (kBlockM 128 or 192)");
  static_assert(kBlockN % 16 == 0 && kBlockN <= 256, "P·V consumes keys in k-steps of 16; wgmma N <= 256");
  static_assert(kHeadDim % 16 == 0 && kHeadDim <= 256, "head dims in k-steps of 16 up to 256");
  static_assert(sizeof(Element) == 2, "the GMMA atoms below take 16-bit inputs");

  // ---- wgmma. Per warpgroup: S (64 x BLK_N) = Q (64 x HDIM) Kᵀ; O (64 x HDIM) += P (64 x BLK_N) V.
  using AtomLayout = Layout<Shape<Int<kMmaWarpGroups>, _1, _1>>;  // warpgroups stacked along M
  using TiledMmaQK = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, ElementAccum, Shape<_64, Int<kBlockN>, Int<kHeadDim>>>(),
      AtomLayout{}));
  using TiledMmaPV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, ElementAccum, Shape<_64, Int<kHeadDim>, Int<kBlockN>>,
                           GMMA::Major::K, GMMA::Major::MN>(),
      AtomLayout{}));

  // ---- Shared memory: K-major (head dim contiguous) swizzled tiles, as TMA writes them.
  using SmemAtom = decltype(smem_atom_k_major<Element, kHeadDim>());
  using SmemLayoutQ = decltype(tile_to_shape(SmemAtom{}, Shape<Int<kBlockM>, Int<kHeadDim>>{}));  // (BLK_M, HDIM)
  using SmemLayoutK =
      decltype(tile_to_shape(SmemAtom{}, Shape<Int<kBlockN>, Int<kHeadDim>, Int<kStages>>{}));  // (BLK_N, HDIM, STAGES)
  using SmemLayoutV = SmemLayoutK;  // V lands exactly as K does: one TMA box shape for both
  // Vᵀ: the same bytes seen as (HDIM, BLK_N): the P·V B operand, MN-major. A K-major atom of 8 rows
  // x 64 elements read transposed is the MN-major atom of 64 x 8, so wgmma's descriptor accepts it.
  using SmemLayoutVt = decltype(composition(
      SmemLayoutV{}, make_ordered_layout(Shape<Int<kHeadDim>, Int<kBlockN>, Int<kStages>>{},
                                         Step<_2, _1, _3>{})));  // (HDIM, BLK_N, STAGES)
  // O is staged through shared memory in Q's layout: in a buffer of its own where it fits (then
  // the producer may load the next tile's Q while this tile's O is still being stored), else in Q's
  // buffer (head dims 192 and 256: Q + K + V already take 216 and 224 KiB), where warpgroup w
  // overwrites only its own 64 rows of Q, which its own Q·Kᵀ products no longer read once its
  // last wgmma retired.
  using SmemLayoutO = SmemLayoutQ;  // (BLK_M, HDIM)
  static constexpr int kTileBytesQ = kBlockM * kHeadDim * 2;
  static constexpr int kTileBytesKV = kBlockN * kHeadDim * 2 * kStages;
  static constexpr bool kSeparateO = kTileBytesQ * 2 + kTileBytesKV * 2 + 1024 <= 227 * 1024;

  // ---- TMA. Global tensors are (seqlen, d, head, batch), the head dim contiguous (stride _1).
  using ShapeQKV = Shape<int32_t, int32_t, int32_t, int32_t>;
  using StrideQKV = Stride<int64_t, _1, int64_t, int64_t>;
  using GmemTensor = decltype(make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)), ShapeQKV{},
                                          StrideQKV{}));
  using TmaQ = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, SmemLayoutQ{},
                                      Shape<Int<kBlockM>, Int<kHeadDim>>{}, _1{}));
  using TmaKV = decltype(make_tma_copy(SM90_TMA_LOAD{}, GmemTensor{}, take<0, 2>(SmemLayoutK{}),
                                       Shape<Int<kBlockN>, Int<kHeadDim>>{}, _1{}));
  static constexpr uint32_t kTmaBytesQ = static_cast<uint32_t>(size(SmemLayoutQ{}) * sizeof(Element));
  static constexpr uint32_t kTmaBytesKV =
      static_cast<uint32_t>(size(take<0, 2>(SmemLayoutK{})) * sizeof(Element));

  // ---- O from shared memory to global: 16-byte chunks, threads along a row's chunks first.
  static constexpr int kGmemElems = 8;  // 16 bytes of a 16-bit type
  static constexpr int kGmemBlockK = kHeadDim % 64 == 0 ? 64 : 32;
  static constexpr int kGmemThreadsPerRow = kGmemBlockK / kGmemElems;
  using GmemTiledCopyO = decltype(make_tiled_copy(
      Copy_Atom<UniversalCopy<uint128_t>, Element>{},
      Layout<Shape<Int<cutlass::NumThreadsPerWarpGroup / kGmemThreadsPerRow>, Int<kGmemThreadsPerRow>>,
             Stride<Int<kGmemThreadsPerRow>, _1>>{},
      Layout<Shape<_1, Int<kGmemElems>>>{}));  // one warpgroup stores its own 64 rows
};

}  // namespace sm90
}  // namespace flashlab
