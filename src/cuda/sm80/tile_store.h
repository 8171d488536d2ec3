// src/cuda/sm80/tile_store.h — an fp32 accumulator tile to a 16-bit tile in global memory, through
// shared memory.
//
// The m16n8 accumulator gives a thread pairs of adjacent columns on scattered rows (fragments.h).
// Stored from there, a warp's instruction writes 4 bytes on each of 8 rows; so the tile is scaled,
// converted, written to shared memory (a swizzled layout of the tile's shape) and read back in
// 16-byte row segments, which become coalesced 16-byte global stores. Used by the forward's O, the
// backward's dK and dV (direct mode) and dQ (conversion kernel, deterministic dQ kernel).
// ncu (H100, b4 h32 s4k d64): the backward's dQ conversion took 196 µs storing from the
// accumulator layout, FlashAttention-2's (through shared memory) 76 µs.
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>

#include "cuda/sm80/fragments.h"

namespace flashlab {
namespace sm80 {

using namespace cute;

// acc: the fp32 fragment of TiledMma over a (kRows, kCols) tile, kRows × kCols = SmemLayout's
// shape. Writes acc · scale to the row-major tile at gptr (row stride row_stride): rows <
// valid_rows, columns < valid_cols. smem: kRows × kCols 16-bit elements no thread still reads
// (the caller's barrier); every thread of the CTA must call this (it contains a barrier).
template <typename TiledMma, typename SmemLayout, typename GmemTiledCopy, typename Element, typename Acc>
__device__ __forceinline__ void store_tile_through_smem(Acc const& acc, float scale, Element* smem,
                                                        Element* gptr, int64_t row_stride, int valid_rows,
                                                        int valid_cols) {
  constexpr int kRows = decltype(size<0>(SmemLayout{}))::value;
  constexpr int kCols = decltype(size<1>(SmemLayout{}))::value;
  const int tid = static_cast<int>(threadIdx.x);
  TiledMma mma;

  // ---- registers -> shared: pairs of adjacent columns, 4-byte stores.
  Tensor scaled = make_fragment_like(acc);  // same layout, fp32
  CUTE_UNROLL
  for (int i = 0; i < size(acc); ++i) scaled(i) = acc(i) * scale;
  Tensor r = convert_fragment<Element>(scaled);
  Tensor s = make_tensor(make_smem_ptr(smem), SmemLayout{});  // (ROWS, COLS)
  auto copy_r2s = make_tiled_copy_C(Copy_Atom<AutoVectorizingCopyWithAssumedAlignment<128>, Element>{}, mma);
  auto thr_r2s = copy_r2s.get_thread_slice(tid);
  copy(copy_r2s, thr_r2s.retile_S(r), thr_r2s.partition_D(s));
  __syncthreads();  // the 16-byte segments below mix values written by different warps

  // ---- shared -> registers (16-byte segments) -> global, predicated on rows and columns.
  Tensor g = make_tensor(make_gmem_ptr(gptr), make_layout(make_shape(Int<kRows>{}, Int<kCols>{}),
                                                          make_stride(row_stride, _1{})));  // (ROWS, COLS)
  Tensor c = make_identity_tensor(Shape<Int<kRows>, Int<kCols>>{});  // (ROWS, COLS) -> (row, col)
  GmemTiledCopy copy_s2g;
  auto thr_s2g = copy_s2g.get_thread_slice(tid);
  Tensor ts = thr_s2g.partition_S(s);           // (CPY, CPY_M, CPY_K)
  Tensor tg = thr_s2g.partition_D(g);           // (CPY, CPY_M, CPY_K)
  Tensor tc = thr_s2g.partition_D(c);           // (CPY, CPY_M, CPY_K) -> (row, col)
  Tensor tr = make_tensor<Element>(shape(tg));  // (CPY, CPY_M, CPY_K)
  copy(copy_s2g, ts, tr);
  CUTE_UNROLL
  for (int m = 0; m < size<1>(tg); ++m) {
    if (static_cast<int>(get<0>(tc(0, m, 0))) < valid_rows) {
      CUTE_UNROLL
      for (int k = 0; k < size<2>(tg); ++k) {
        if (static_cast<int>(get<1>(tc(0, m, k))) < valid_cols) copy(copy_s2g, tr(_, m, k), tg(_, m, k));
      }
    }
  }
}

}  // namespace sm80
}  // namespace flashlab
