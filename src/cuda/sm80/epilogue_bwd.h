// src/cuda/sm80/epilogue_bwd.h — where the backward's accumulators go.
//
//   EpilogueDkv::store     dK · scale and dV of the CTA's key block, by BwdGradParams::dkv_mode:
//                          kDirect  -> the dtype outputs (the CTA is the only writer)
//                          kAtomic  -> fp32 atomicAdd into the kv head's workspace slice (GQA)
//                          kPartial -> fp32 store into the query head's own slice (GQA,
//                                      deterministic; bwd_prepost.h sums the slices in order)
//   add_dq_atomic          one query block's dS·K into dq_accum (fp32 red.global.add)
//   store_dq               the deterministic dQ kernel's dQ · scale -> the dtype output
// Every store is predicated on rows < the sequence length and columns < head_dim. Stores go
// straight from the accumulator layout (pairs of adjacent columns per thread): they run once per
// CTA (dK, dV, deterministic dQ), so staging through shared memory for 16-byte stores, as the
// forward's epilogue does, is left to profiling.
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>

#include "cuda/sm80/bwd_params.h"
#include "cuda/sm80/fragments.h"
#include "cuda/sm80/tile_scheduler.h"

namespace flashlab {
namespace sm80 {

using namespace cute;

// Writes `acc` · scale (an accumulator of TiledMma over a (kRows, HDIM) tile) to a row-major tile
// at gptr with row stride `row_stride`: rows < valid_rows, columns < head_dim. Op: how one value
// is written (convert-and-store, store, atomicAdd).
template <typename TiledMma, int kRows, int kHeadDim, typename T, typename Acc, typename Op>
__device__ __forceinline__ void write_tile(Acc const& acc, float scale, T* gptr, int64_t row_stride,
                                           int valid_rows, int head_dim, Op op) {
  TiledMma mma;
  auto thr_mma = mma.get_thread_slice(threadIdx.x);
  Tensor g = make_tensor(make_gmem_ptr(gptr), make_layout(make_shape(Int<kRows>{}, Int<kHeadDim>{}),
                                                          make_stride(row_stride, _1{})));  // (ROWS, HDIM)
  Tensor c = make_identity_tensor(Shape<Int<kRows>, Int<kHeadDim>>{});  // (ROWS, HDIM) -> (row, col)
  Tensor tg = thr_mma.partition_C(g);                                   // ((2, 2), MMA_M, MMA_N)
  Tensor tc = thr_mma.partition_C(c);                                   // ((2, 2), MMA_M, MMA_N)
  static_assert(decltype(size(tg))::value == decltype(size(acc))::value, "accumulator and tile partition");
  CUTE_UNROLL
  for (int i = 0; i < size(acc); ++i) {
    if (static_cast<int>(get<0>(tc(i))) < valid_rows && static_cast<int>(get<1>(tc(i))) < head_dim)
      op(&tg(i), acc(i) * scale);
  }
}

template <typename Traits>
struct EpilogueDkv {
  using Element = typename Traits::Element;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;

  const BwdGradParams& g;
  const FwdTile& t;
  int n_block;
  int head_dim;

  __device__ EpilogueDkv(const BwdGradParams& grad, const FwdTile& tile, int n_block_, int head_dim_)
      : g(grad), t(tile), n_block(n_block_), head_dim(head_dim_) {}

  // acc_dk, acc_dv: ((2, 2), MMA_N, MMA_D) fp32 of (BLK_N, HDIM), TiledMmadKV. seqlen_k: the
  // call's (maximum) key length, the workspace's rows per sequence for fixed lengths.
  template <typename Acc>
  __device__ void store(Acc const& acc_dk, Acc const& acc_dv, float softmax_scale, int kv_group,
                        int seqlen_k) const {
    using Mma = typename Traits::TiledMmadKV;
    const int64_t n0 = int64_t(n_block) * kBlockN;
    const int rows = t.k_len - static_cast<int>(n0);
    if (g.dkv_mode == DkvMode::kDirect) {
      auto st = [](Element* dst, float v) { *dst = Element(v); };
      Element* dk = static_cast<Element*>(g.dk) +
                    t.k_offset(g.dk_batch_stride, g.dk_row_stride, g.dk_head_stride, n0, t.head / kv_group);
      Element* dv = static_cast<Element*>(g.dv) +
                    t.k_offset(g.dv_batch_stride, g.dv_row_stride, g.dv_head_stride, n0, t.head / kv_group);
      write_tile<Mma, kBlockN, kHeadDim>(acc_dk, softmax_scale, dk, g.dk_row_stride, rows, head_dim, st);
      write_tile<Mma, kBlockN, kHeadDim>(acc_dv, 1.0f, dv, g.dv_row_stride, rows, head_dim, st);
      return;
    }
    // Workspace slices: (rows_k, heads_acc, head_dim) fp32, rows as the tensors' (packed) rows.
    const int slice = g.dkv_mode == DkvMode::kAtomic ? t.head / kv_group : t.head;
    const int64_t row_stride = int64_t(g.heads_acc) * head_dim;
    const int64_t off = t.k_offset(int64_t(seqlen_k) * row_stride, row_stride, head_dim, n0, slice);
    float* dk = g.dk_accum + off;
    float* dv = g.dv_accum + off;
    if (g.dkv_mode == DkvMode::kAtomic) {
      auto add = [](float* dst, float v) { atomicAdd(dst, v); };
      write_tile<Mma, kBlockN, kHeadDim>(acc_dk, softmax_scale, dk, row_stride, rows, head_dim, add);
      write_tile<Mma, kBlockN, kHeadDim>(acc_dv, 1.0f, dv, row_stride, rows, head_dim, add);
    } else {
      auto st = [](float* dst, float v) { *dst = v; };
      write_tile<Mma, kBlockN, kHeadDim>(acc_dk, softmax_scale, dk, row_stride, rows, head_dim, st);
      write_tile<Mma, kBlockN, kHeadDim>(acc_dv, 1.0f, dv, row_stride, rows, head_dim, st);
    }
  }
};

// dst[0] += a, dst[1] += b. On sm_90 one red.global.add.v2.f32 (8-byte aligned dst): a warp's
// instruction then covers 8 rows x 32 full bytes, half the requests and half the L2 sectors of
// two scalar reductions (ncu on an H200: 268M -> 134M sectors at b4 s4k h16 d128, as
// FlashAttention-2's). Earlier GPUs take two scalar atomics.
__device__ __forceinline__ void atomic_add_pair(float* dst, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(dst), make_float2(a, b));
#else
  atomicAdd(dst, a);
  atomicAdd(dst + 1, b);
#endif
}

// acc_dq: ((2, 2), MMA_M, MMA_D) fp32 of (BLK_M, HDIM), TiledMmadQ: added to dq_accum rows
// [m0, m0 + BLK_M) of (sequence, head); unscaled (the postprocess multiplies by the scale).
// Values come in pairs of adjacent columns (mode (0, 0) of the m16n8 accumulator), added with one
// atomic_add_pair each; a whole tile (every row in the sequence, head_dim = the bucket) runs
// without per-value predicates. head_dim is a multiple of 8, so a pair is valid or invalid whole,
// and every pair's address is 8-byte aligned (workspace aligned, even row stride and column).
template <typename Traits, typename Acc>
__device__ __forceinline__ void add_dq_atomic(Acc const& acc_dq, const BwdGradParams& g, const FwdTile& t,
                                              int64_t accum_batch_stride, int heads_q, int head_dim,
                                              int m_block) {
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kHeadDim = Traits::kHeadDim;
  const int64_t m0 = int64_t(m_block) * kBlockM;
  const int64_t row_stride = int64_t(heads_q) * head_dim;
  float* dst = g.dq_accum + t.q_offset(accum_batch_stride, row_stride, head_dim, m0, t.head);
  typename Traits::TiledMmadQ mma;
  auto thr_mma = mma.get_thread_slice(threadIdx.x);
  Tensor gdq = make_tensor(make_gmem_ptr(dst), make_layout(Shape<Int<kBlockM>, Int<kHeadDim>>{},
                                                           make_stride(row_stride, _1{})));  // (BLK_M, HDIM)
  Tensor c = make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{});  // (BLK_M, HDIM) -> (row, col)
  Tensor tg = thr_mma.partition_C(gdq);                                  // ((2, 2), MMA_M, MMA_D)
  Tensor tc = thr_mma.partition_C(c);                                    // ((2, 2), MMA_M, MMA_D)
  static_assert(decltype(size<0, 0>(tg))::value == 2, "mode (0, 0): a pair of adjacent columns");
  const int valid_rows = t.q_len - static_cast<int>(m0);
  if (valid_rows >= kBlockM && head_dim == kHeadDim) {
    CUTE_UNROLL
    for (int i = 0; i < size(acc_dq); i += 2) atomic_add_pair(&tg(i), acc_dq(i), acc_dq(i + 1));
  } else {
    CUTE_UNROLL
    for (int i = 0; i < size(acc_dq); i += 2) {
      if (static_cast<int>(get<0>(tc(i))) < valid_rows && static_cast<int>(get<1>(tc(i))) < head_dim)
        atomic_add_pair(&tg(i), acc_dq(i), acc_dq(i + 1));
    }
  }
}

// The deterministic dQ kernel's result: dQ = scale · acc_dq -> the dtype output.
template <typename Traits, typename Acc>
__device__ __forceinline__ void store_dq(Acc const& acc_dq, const BwdGradParams& g, const FwdTile& t,
                                         float softmax_scale, int head_dim) {
  using Element = typename Traits::Element;
  const int64_t m0 = int64_t(t.m_block) * Traits::kBlockM;
  Element* dst = static_cast<Element*>(g.dq) +
                 t.q_offset(g.dq_batch_stride, g.dq_row_stride, g.dq_head_stride, m0, t.head);
  auto st = [](Element* p, float v) { *p = Element(v); };
  write_tile<typename Traits::TiledMmadQ, Traits::kBlockM, Traits::kHeadDim>(
      acc_dq, softmax_scale, dst, g.dq_row_stride, t.q_len - static_cast<int>(m0), head_dim, st);
}

}  // namespace sm80
}  // namespace flashlab
