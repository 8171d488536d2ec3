// src/cuda/sm80/epilogue_bwd.h — where the backward's accumulators go.
//
//   EpilogueDkv::store     dK · scale and dV of the CTA's key block, by BwdGradArgs::dkv_mode:
//                          kDirect  -> the dtype outputs (the CTA is the only writer)
//                          kAtomic  -> fp32 atomicAdd into the kv head's workspace slice (GQA)
//                          kPartial -> fp32 store into the query head's own slice (GQA,
//                                      deterministic; bwd_prepost.h sums the slices in order)
//   add_dq_atomic          one query block's dS·K into its dq_accum tile (fp32 red.global.add)
//   load_dq_accum          the tile back into the same accumulator fragment (conversion kernel)
//   store_dq               dQ · scale -> the dtype output (deterministic dQ kernel, conversion)
// Every store is predicated on rows < the sequence length and columns < head_dim. The dtype
// outputs (dK, dV direct; dQ) leave through shared memory in 16-byte stores (tile_store.h); the
// fp32 GQA slices go straight from the accumulator layout (write_tile).
// EpilogueDkv's Arguments / Params: common::BwdGradArgs. It has no shared storage of its own: it
// stages dK and dV in the mainloop's K and V tiles, which the kernel hands it.
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>

#include "cuda/common/bwd_workspace.h"
#include "cuda/common/kernel_args.h"
#include "cuda/common/tile_scheduler.h"
#include "cuda/sm80/fragments.h"
#include "cuda/sm80/tile_store.h"

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

  using Arguments = BwdGradArgs;
  using Params = BwdGradArgs;
  static Params to_params(const Arguments& a) { return a; }

  const Params& g;
  const WorkTile& t;
  int n_block;
  int head_dim;

  __device__ EpilogueDkv(const Params& grad, const WorkTile& tile, int n_block_, int head_dim_)
      : g(grad), t(tile), n_block(n_block_), head_dim(head_dim_) {}

  // acc_dk, acc_dv: ((2, 2), MMA_N, MMA_D) fp32 of (BLK_N, HDIM), TiledMmadKV. seqlen_k: the
  // call's (maximum) key length, the workspace's rows per sequence for fixed lengths.
  // smem_k, smem_v: the mainloop's K and V tiles; every thread of the CTA must call this (direct
  // mode stages dK and dV there, behind a barrier).
  template <typename Acc>
  __device__ void store(Acc const& acc_dk, Acc const& acc_dv, float softmax_scale, int kv_group, int seqlen_k,
                        Element* smem_k, Element* smem_v) const {
    using Mma = typename Traits::TiledMmadKV;
    const int64_t n0 = int64_t(n_block) * kBlockN;
    const int rows = t.k_len - static_cast<int>(n0);
    if (g.dkv_mode == DkvMode::kDirect) {
      Element* dk = static_cast<Element*>(g.dk) +
                    t.k_offset(g.dk_batch_stride, g.dk_row_stride, g.dk_head_stride, n0, t.head / kv_group);
      Element* dv = static_cast<Element*>(g.dv) +
                    t.k_offset(g.dv_batch_stride, g.dv_row_stride, g.dv_head_stride, n0, t.head / kv_group);
      __syncthreads();  // every warp is done reading K and V (the last block's products)
      using Layout = typename Traits::SmemLayoutKV;
      using Copy = typename Traits::GmemTiledCopyStore;
      store_tile_through_smem<Mma, Layout, Copy>(acc_dk, softmax_scale, smem_k, dk, g.dk_row_stride, rows,
                                                 head_dim);
      store_tile_through_smem<Mma, Layout, Copy>(acc_dv, 1.0f, smem_v, dv, g.dv_row_stride, rows, head_dim);
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

// dq_accum's order inside a tile (common/bwd_workspace.h): thread t's accumulator values i = kVec·c + v go to
// c · (threads · kVec) + t · kVec + v. A warp's reduction instruction then writes 32 consecutive
// kVec-vectors: whole 128-byte lines. Written row-major instead (the accumulator's own layout: a
// thread holds pairs of adjacent columns in 8 rows), each instruction touched 8 lines, and the
// reductions queued behind each other in the load/store unit (ncu on an H200, b4 s4k h16 d128:
// "lg_throttle" 0.47 cycles per issued instruction vs FlashAttention-2's 0.01, plus the loop-top
// stalls of warps whose registers were still waiting to be read by their reductions).
// sm_90 adds four values per instruction (red.global.add.v4.f32); earlier GPUs one.
struct DqAccumOrder {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  static constexpr int kVec = 4;
#else
  static constexpr int kVec = 1;
#endif
  template <int kThreads>
  __device__ __forceinline__ static int index(int i, int tid) {
    return (i / kVec) * (kThreads * kVec) + tid * kVec + i % kVec;
  }
};

template <typename Traits>
__device__ __forceinline__ float* dq_accum_tile(const BwdGradArgs& g, const WorkTile& t, int m_block,
                                                int seqlen_q, int heads_q) {
  static_assert(kDqAccumRowAlign % Traits::kBlockM == 0, "the workspace reserves whole tiles");
  return g.dq_accum +
         dq_accum_tile_offset(t.batch, m_block, t.head, seqlen_q, heads_q, Traits::kBlockM, Traits::kHeadDim);
}

// acc_dq: ((2, 2), MMA_M, MMA_D) fp32 of (BLK_M, HDIM), TiledMmadQ: added, unscaled (the
// conversion multiplies by the scale), to query block m_block's dq_accum tile. No predicates:
// the tile has room for every row and column, and rows past the sequence / columns past head_dim
// hold exact zeros (their dS rows and K columns are zero).
template <typename Traits, typename Acc>
__device__ __forceinline__ void add_dq_atomic(Acc const& acc_dq, const BwdGradArgs& g, const WorkTile& t,
                                              int seqlen_q, int heads_q, int m_block) {
  constexpr int kVec = DqAccumOrder::kVec;
  static_assert(decltype(size(acc_dq))::value % kVec == 0, "whole vectors per thread");
  float* tile = dq_accum_tile<Traits>(g, t, m_block, seqlen_q, heads_q);
  const int tid = static_cast<int>(threadIdx.x);
  CUTE_UNROLL
  for (int i = 0; i < size(acc_dq); i += kVec) {
    float* dst = tile + DqAccumOrder::index<Traits::kNThreads>(i, tid);
    if constexpr (kVec == 4) {
      atomicAdd(reinterpret_cast<float4*>(dst),
                make_float4(acc_dq(i), acc_dq(i + 1), acc_dq(i + 2), acc_dq(i + 3)));
    } else {
      atomicAdd(dst, acc_dq(i));
    }
  }
}

// The inverse read: query block m_block's dq_accum tile -> acc_dq, the same fragment add_dq_atomic
// took it from (bwd_convert_dq_kernel).
template <typename Traits, typename Acc>
__device__ __forceinline__ void load_dq_accum(Acc& acc_dq, const BwdGradArgs& g, const WorkTile& t,
                                              int seqlen_q, int heads_q, int m_block) {
  constexpr int kVec = DqAccumOrder::kVec;
  const float* tile = dq_accum_tile<Traits>(g, t, m_block, seqlen_q, heads_q);
  const int tid = static_cast<int>(threadIdx.x);
  CUTE_UNROLL
  for (int i = 0; i < size(acc_dq); i += kVec) {
    const float* src = tile + DqAccumOrder::index<Traits::kNThreads>(i, tid);
    if constexpr (kVec == 4) {
      const float4 v = *reinterpret_cast<const float4*>(src);
      acc_dq(i) = v.x, acc_dq(i + 1) = v.y, acc_dq(i + 2) = v.z, acc_dq(i + 3) = v.w;
    } else {
      acc_dq(i) = *src;
    }
  }
}

// dQ = scale · acc_dq -> the dtype output (deterministic dQ kernel, conversion kernel), staged in
// smem (one (BLK_M, HDIM) tile that no thread still reads). Every thread of the CTA must call this.
template <typename Traits, typename Acc>
__device__ __forceinline__ void store_dq(Acc const& acc_dq, const BwdGradArgs& g, const WorkTile& t,
                                         float softmax_scale, int head_dim, typename Traits::Element* smem) {
  using Element = typename Traits::Element;
  const int64_t m0 = int64_t(t.m_block) * Traits::kBlockM;
  Element* dst = static_cast<Element*>(g.dq) +
                 t.q_offset(g.dq_batch_stride, g.dq_row_stride, g.dq_head_stride, m0, t.head);
  store_tile_through_smem<typename Traits::TiledMmadQ, typename Traits::SmemLayoutQdO,
                          typename Traits::GmemTiledCopyStore>(
      acc_dq, softmax_scale, smem, dst, g.dq_row_stride, t.q_len - static_cast<int>(m0), head_dim);
}

}  // namespace sm80
}  // namespace flashlab
