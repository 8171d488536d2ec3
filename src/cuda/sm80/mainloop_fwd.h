// src/cuda/sm80/mainloop_fwd.h — the forward mainloop's data movement and matrix products.
//
//   load_q / load_k / load_v   global -> shared with cp.async (GmemTiledCopyQKV); rows past the
//                              sequence and columns past head_dim are zero-filled, never read.
//   gemm_qk                    S = Q·Kᵀ: Q and K fragments stream from shared memory (ldmatrix)
//                              one k-step ahead of the MMAs.
//   gemm_pv                    O += P·V: P is already in registers (the A operand), V streams
//                              through ldmatrix.trans.
// The kernel (flash_fwd_kernel.h) orders these calls and owns the barriers between them.
// Arguments: common::FwdInputArgs (q, k, v, strides); Params: the same (sm80 precomputes nothing).
// SharedStorage: Q, one K and one V tile.
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>

#include "cuda/common/kernel_args.h"
#include "cuda/common/tile_scheduler.h"
#include "cuda/sm80/fragments.h"

namespace flashlab {
namespace sm80 {

using namespace cute;

// acc += A·B with both operands read from shared memory; the copy of k-step k + 1 is issued
// before the MMAs of step k so the ldmatrix latency hides behind tensor-core work.
//   tCrA (MMA, MMA_M, MMA_K) / tCrB (MMA, MMA_N, MMA_K): register fragments, filled here
//   tCsA (CPY, CPY_M, CPY_K) / tCsB (CPY, CPY_N, CPY_K): shared-memory views for the copies
template <typename TiledMma, typename Acc, typename FragA, typename FragB, typename SmemA, typename SmemB,
          typename CopyA, typename CopyB, typename ThrCopyA, typename ThrCopyB>
__device__ __forceinline__ void gemm_ss(TiledMma const& mma, Acc& acc, FragA& tCrA, FragB& tCrB,
                                        SmemA const& tCsA, SmemB const& tCsB, CopyA const& copy_a,
                                        CopyB const& copy_b, ThrCopyA const& thr_copy_a,
                                        ThrCopyB const& thr_copy_b) {
  Tensor tCrA_view = thr_copy_a.retile_D(tCrA);  // (CPY, CPY_M, CPY_K)
  Tensor tCrB_view = thr_copy_b.retile_D(tCrB);  // (CPY, CPY_N, CPY_K)
  CUTE_STATIC_ASSERT_V(size<1>(tCsA) == size<1>(tCrA_view));
  CUTE_STATIC_ASSERT_V(size<1>(tCsB) == size<1>(tCrB_view));
  CUTE_STATIC_ASSERT_V(size<2>(tCrA) == size<2>(tCrB));
  copy(copy_a, tCsA(_, _, _0{}), tCrA_view(_, _, _0{}));
  copy(copy_b, tCsB(_, _, _0{}), tCrB_view(_, _, _0{}));
  CUTE_UNROLL
  for (int k = 0; k < size<2>(tCrA); ++k) {
    if (k + 1 < size<2>(tCrA)) {
      copy(copy_a, tCsA(_, _, k + 1), tCrA_view(_, _, k + 1));
      copy(copy_b, tCsB(_, _, k + 1), tCrB_view(_, _, k + 1));
    }
    gemm(mma, tCrA(_, _, k), tCrB(_, _, k), acc);
  }
}

// acc += A·B with A already in registers (P) and B read from shared memory.
template <typename TiledMma, typename Acc, typename FragA, typename FragB, typename SmemB, typename CopyB,
          typename ThrCopyB>
__device__ __forceinline__ void gemm_rs(TiledMma const& mma, Acc& acc, FragA const& tCrA, FragB& tCrB,
                                        SmemB const& tCsB, CopyB const& copy_b, ThrCopyB const& thr_copy_b) {
  Tensor tCrB_view = thr_copy_b.retile_D(tCrB);  // (CPY, CPY_N, CPY_K)
  CUTE_STATIC_ASSERT_V(size<1>(tCsB) == size<1>(tCrB_view));
  CUTE_STATIC_ASSERT_V(size<2>(tCrA) == size<2>(tCrB));
  copy(copy_b, tCsB(_, _, _0{}), tCrB_view(_, _, _0{}));
  CUTE_UNROLL
  for (int k = 0; k < size<2>(tCrA); ++k) {
    if (k + 1 < size<2>(tCrA)) copy(copy_b, tCsB(_, _, k + 1), tCrB_view(_, _, k + 1));
    gemm(mma, tCrA(_, _, k), tCrB(_, _, k), acc);
  }
}

// Copies rows [0, valid_rows) × columns [0, head_dim) of a (kRows, HDIM) tile (row stride
// `row_stride`) into shared memory with cp.async (Traits::GmemTiledCopyQKV, 16 bytes per thread per
// copy); the rest of the tile is zero-filled with plain stores, so out-of-range addresses are never
// formed into a load. Zeros (not garbage) matter: a NaN bit pattern in a padded K column or V row
// would poison the products through 0 · NaN. A whole tile (the common case) takes one unpredicated
// copy. Both passes load Q, K, V (and dO) with it.
template <typename Traits, int kRows, typename SmemLayout>
__device__ __forceinline__ void load_tile_async(const typename Traits::Element* gptr, int64_t row_stride,
                                                int valid_rows, int head_dim, typename Traits::Element* sptr,
                                                int tid) {
  constexpr int kHeadDim = Traits::kHeadDim;
  Tensor g = make_tensor(make_gmem_ptr(gptr), make_layout(make_shape(Int<kRows>{}, Int<kHeadDim>{}),
                                                          make_stride(row_stride, _1{})));  // (ROWS, HDIM)
  Tensor s = make_tensor(make_smem_ptr(sptr), SmemLayout{});                                // (ROWS, HDIM)
  Tensor c = make_identity_tensor(make_shape(Int<kRows>{}, Int<kHeadDim>{}));  // (ROWS, HDIM) -> (row, col)
  typename Traits::GmemTiledCopyQKV tiled_copy;
  auto thr_copy = tiled_copy.get_thread_slice(tid);
  Tensor tg = thr_copy.partition_S(g);                // (CPY, CPY_M, CPY_K)
  Tensor ts = thr_copy.partition_D(s);                // (CPY, CPY_M, CPY_K)
  Tensor tc = thr_copy.partition_S(c);                // (CPY, CPY_M, CPY_K) -> (row, col)
  if (valid_rows >= kRows && head_dim == kHeadDim) {  // a whole tile: no per-copy predicates
    copy(tiled_copy, tg, ts);
    return;
  }
  CUTE_UNROLL
  for (int m = 0; m < size<1>(tg); ++m) {
    const bool row_ok = static_cast<int>(get<0>(tc(0, m, 0))) < valid_rows;
    CUTE_UNROLL
    for (int k = 0; k < size<2>(tg); ++k) {
      if (row_ok && static_cast<int>(get<1>(tc(0, m, k))) < head_dim) {
        copy(tiled_copy, tg(_, m, k), ts(_, m, k));
      } else {
        clear(ts(_, m, k));
      }
    }
  }
}

template <typename Traits_>
struct MainloopFwd {
  using Traits = Traits_;
  using Element = typename Traits::Element;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;

  using Arguments = FwdInputArgs;
  using Params = FwdInputArgs;
  static Params to_params(const Arguments& a) { return a; }

  struct SharedStorage {
    array_aligned<Element, cosize_v<typename Traits::SmemLayoutQ>, 128> q;   // (BLK_M, HDIM)
    array_aligned<Element, cosize_v<typename Traits::SmemLayoutKV>, 128> k;  // (BLK_N, HDIM)
    array_aligned<Element, cosize_v<typename Traits::SmemLayoutKV>, 128> v;  // (BLK_N, HDIM)
  };

  // Uniform values (strides, head_dim) stay in the kernel parameters (constant bank) instead of
  // registers: the accumulators need almost all of them.
  const Params& p;
  // Row 0 of this CTA's query block and row 0 of the sequence's keys and values.
  const Element* q_ptr;
  const Element* k_ptr;
  const Element* v_ptr;
  int q_rows;  // valid query rows from q_ptr on (may exceed kBlockM)
  int k_len;   // keys in the sequence
  SharedStorage& smem;
  int tid;

  __device__ MainloopFwd(const Params& params, const WorkTile& t, SharedStorage& smem_)
      : p(params), smem(smem_), tid(static_cast<int>(threadIdx.x)) {
    const int64_t m0 = int64_t(t.m_block) * kBlockM;
    const int kv_head = t.head / p.kv_group;
    q_ptr = static_cast<const Element*>(p.q) +
            t.q_offset(p.q_batch_stride, p.q_row_stride, p.q_head_stride, m0, t.head);
    k_ptr = static_cast<const Element*>(p.k) +
            t.k_offset(p.k_batch_stride, p.k_row_stride, p.k_head_stride, 0, kv_head);
    v_ptr = static_cast<const Element*>(p.v) +
            t.k_offset(p.v_batch_stride, p.v_row_stride, p.v_head_stride, 0, kv_head);
    q_rows = t.q_len - static_cast<int>(m0);
    k_len = t.k_len;
  }
  __device__ Element* smem_q() const { return smem.q.data(); }
  __device__ Element* smem_k() const { return smem.k.data(); }
  __device__ Element* smem_v() const { return smem.v.data(); }

  __device__ void load_q() const {
    load_tile_async<Traits, kBlockM, typename Traits::SmemLayoutQ>(q_ptr, p.q_row_stride, q_rows, p.head_dim,
                                                                   smem_q(), tid);
  }
  __device__ void load_k(int n_block) const {
    const int64_t n0 = int64_t(n_block) * kBlockN;
    load_tile_async<Traits, kBlockN, typename Traits::SmemLayoutKV>(
        k_ptr + n0 * p.k_row_stride, p.k_row_stride, k_len - static_cast<int>(n0), p.head_dim, smem_k(), tid);
  }
  __device__ void load_v(int n_block) const {
    const int64_t n0 = int64_t(n_block) * kBlockN;
    load_tile_async<Traits, kBlockN, typename Traits::SmemLayoutKV>(
        v_ptr + n0 * p.v_row_stride, p.v_row_stride, k_len - static_cast<int>(n0), p.head_dim, smem_v(), tid);
  }

  // acc_s: ((2, 2), MMA_M, MMA_N) fp32 fragment of the (BLK_M, BLK_N) tile S = Q·Kᵀ (unscaled).
  template <typename AccS>
  __device__ void gemm_qk(AccS& acc_s) const {
    typename Traits::TiledMma mma;
    auto thr_mma = mma.get_thread_slice(tid);
    Tensor sQ = make_tensor(make_smem_ptr(smem_q()), typename Traits::SmemLayoutQ{});   // (BLK_M, HDIM)
    Tensor sK = make_tensor(make_smem_ptr(smem_k()), typename Traits::SmemLayoutKV{});  // (BLK_N, HDIM)
    Tensor tSrQ = thr_mma.partition_fragment_A(sQ);                                     // (MMA, MMA_M, MMA_K)
    Tensor tSrK = thr_mma.partition_fragment_B(sK);                                     // (MMA, MMA_N, MMA_K)
    auto copy_q = make_tiled_copy_A(typename Traits::SmemCopyAtom{}, mma);
    auto copy_k = make_tiled_copy_B(typename Traits::SmemCopyAtom{}, mma);
    auto thr_copy_q = copy_q.get_thread_slice(tid);
    auto thr_copy_k = copy_k.get_thread_slice(tid);
    Tensor tSsQ = thr_copy_q.partition_S(sQ);  // (CPY, CPY_M, CPY_K)
    Tensor tSsK = thr_copy_k.partition_S(sK);  // (CPY, CPY_N, CPY_K)
    gemm_ss(mma, acc_s, tSrQ, tSrK, tSsQ, tSsK, copy_q, copy_k, thr_copy_q, thr_copy_k);
  }

  // acc_o: ((2, 2), MMA_M, HDIM / 8) fp32; tOrP: ((2, 2, 2), MMA_M, BLK_N / 16) P as the A operand.
  template <typename AccO, typename FragP>
  __device__ void gemm_pv(AccO& acc_o, FragP const& tOrP) const {
    typename Traits::TiledMma mma;
    auto thr_mma = mma.get_thread_slice(tid);
    Tensor sVt = make_tensor(make_smem_ptr(smem_v()), typename Traits::SmemLayoutVt{});  // (HDIM, BLK_N)
    Tensor sVtNoSwizzle =
        make_tensor(make_smem_ptr(smem_v()), typename Traits::SmemLayoutVtNoSwizzle{});  // (HDIM, BLK_N)
    Tensor tOrVt = thr_mma.partition_fragment_B(sVtNoSwizzle);  // (MMA, MMA_N, MMA_K)
    auto copy_v = make_tiled_copy_B(typename Traits::SmemCopyAtomTransposed{}, mma);
    auto thr_copy_v = copy_v.get_thread_slice(tid);
    Tensor tOsVt = thr_copy_v.partition_S(sVt);  // (CPY, CPY_N, CPY_K)
    gemm_rs(mma, acc_o, tOrP, tOrVt, tOsVt, copy_v, thr_copy_v);
  }
};

}  // namespace sm80
}  // namespace flashlab
