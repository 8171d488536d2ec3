// src/cuda/sm80/mainloop_bwd.h — the backward's data movement and matrix products.
//
//   load_q / load_do / load_k / load_v   global -> shared with cp.async; rows past the sequence and
//                                        columns past head_dim are zero-filled (never read)
//   load_row_stats                       LSE · log2(e) and D of the thread's S rows -> registers
//   gemm_s_dp                            S = Q·Kᵀ and dP = dO·Vᵀ            (TiledMmaSdP)
//   store_p_ds                           P ∘ Z and dS -> shared memory (16-bit)
//   gemm_dv / gemm_dk                    dV += Pᵀ·dO, dK += dSᵀ·Q           (TiledMmadKV)
//   gemm_dq                              dQ (+)= dS·K                       (TiledMmadQ)
// The kernels (flash_bwd_kernel.h) order these calls and own the barriers between them.
// Arguments: the backward's inputs (common::BwdInputArgs), the row statistics (LSE, D) and the
// call's seqlen_q (D's row stride for fixed lengths); Params: the same. SharedStorage: Q and dO
// (kStages each), K, V, P and dS.
#pragma once

#include <cmath>
#include <cstdint>

#include <cute/tensor.hpp>

#include "cuda/common/kernel_args.h"
#include "cuda/common/math.h"  // kLog2e
#include "cuda/common/tile_scheduler.h"
#include "cuda/sm80/fragments.h"
#include "cuda/sm80/mainloop_fwd.h"  // gemm_ss, load_tile_async

namespace flashlab {
namespace sm80 {

using namespace cute;

// acc += A·B, both operands from shared memory. sA / sB are the (possibly transposed, swizzled)
// views the copies read; fA / fB views of the same shape without the swizzle, from which the
// register fragments take their shape.
template <typename TiledMma, typename CopyAtomA, typename CopyAtomB, typename Acc, typename SA, typename FA,
          typename SB, typename FB>
__device__ __forceinline__ void gemm_smem(Acc& acc, SA const& sA, FA const& fA, SB const& sB, FB const& fB,
                                          int tid) {
  TiledMma mma;
  auto thr_mma = mma.get_thread_slice(tid);
  Tensor tCrA = thr_mma.partition_fragment_A(fA);  // (MMA, MMA_M, MMA_K)
  Tensor tCrB = thr_mma.partition_fragment_B(fB);  // (MMA, MMA_N, MMA_K)
  auto copy_a = make_tiled_copy_A(CopyAtomA{}, mma);
  auto copy_b = make_tiled_copy_B(CopyAtomB{}, mma);
  auto thr_copy_a = copy_a.get_thread_slice(tid);
  auto thr_copy_b = copy_b.get_thread_slice(tid);
  Tensor tCsA = thr_copy_a.partition_S(sA);  // (CPY, CPY_M, CPY_K)
  Tensor tCsB = thr_copy_b.partition_S(sB);  // (CPY, CPY_N, CPY_K)
  gemm_ss(mma, acc, tCrA, tCrB, tCsA, tCsB, copy_a, copy_b, thr_copy_a, thr_copy_b);
}

template <typename Traits_>
struct MainloopBwd {
  using Traits = Traits_;
  using Element = typename Traits::Element;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr int kStages = Traits::kStages;

  struct Arguments {
    BwdInputArgs in;
    BwdRowArgs rows;
    int seqlen_q = 0;  // the call's (maximum) query length
  };
  using Params = Arguments;
  static Params to_params(const Arguments& a) { return a; }

  template <typename Layout>
  using Tile = array_aligned<Element, cosize_v<Layout>, 128>;
  template <typename Layout>
  using Stages = array_aligned<Element, kStages * cosize_v<Layout>, 128>;
  struct SharedStorage {
    Stages<typename Traits::SmemLayoutQdO> q;   // kStages × (BLK_M, HDIM)
    Stages<typename Traits::SmemLayoutQdO> dO;  // kStages × (BLK_M, HDIM)
    Tile<typename Traits::SmemLayoutKV> k;      // (BLK_N, HDIM)
    Tile<typename Traits::SmemLayoutKV> v;      // (BLK_N, HDIM)
    Tile<typename Traits::SmemLayoutPdS> p;     // (BLK_M, BLK_N) P ∘ Z
    Tile<typename Traits::SmemLayoutPdS> ds;    // (BLK_M, BLK_N) dS
  };
  static_assert(sizeof(SharedStorage) == Traits::kSmemBytes,
                "the storage is exactly what bwd_tile_size.h counts");

  const BwdInputArgs& p;
  const Element* q_ptr;   // row 0 of the sequence, query head
  const Element* do_ptr;  // row 0 of the sequence, query head
  const Element* k_ptr;   // row 0 of the sequence, kv head
  const Element* v_ptr;
  const float* lse_ptr;   // LSE of row 0 of the sequence, query head
  const float* dsum_ptr;  // D of row 0 of the sequence, query head (workspace)
  int q_len, k_len;
  SharedStorage& smem;
  int tid;

  __device__ MainloopBwd(const Params& params, const WorkTile& t, SharedStorage& smem_)
      : p(params.in), q_len(t.q_len), k_len(t.k_len), smem(smem_), tid(static_cast<int>(threadIdx.x)) {
    const BwdRowArgs& rows = params.rows;
    const int kv_head = t.head / p.kv_group;
    q_ptr = static_cast<const Element*>(p.q) +
            t.q_offset(p.q_batch_stride, p.q_row_stride, p.q_head_stride, 0, t.head);
    do_ptr = static_cast<const Element*>(p.dout) +
             t.q_offset(p.do_batch_stride, p.do_row_stride, p.do_head_stride, 0, t.head);
    k_ptr = static_cast<const Element*>(p.k) +
            t.k_offset(p.k_batch_stride, p.k_row_stride, p.k_head_stride, 0, kv_head);
    v_ptr = static_cast<const Element*>(p.v) +
            t.k_offset(p.v_batch_stride, p.v_row_stride, p.v_head_stride, 0, kv_head);
    lse_ptr = rows.lse + t.lse_offset(rows.lse_batch_stride, rows.lse_head_stride);
    // D: (heads_q, rows_q) with row b · seqlen_q + i, or the packed row for varlen.
    dsum_ptr = rows.dsum + t.q_offset(params.seqlen_q, 1, rows.rows_q, 0, t.head);
  }

  __device__ Element* smem_q(int stage) const {
    return smem.q.data() + stage * cosize_v<typename Traits::SmemLayoutQdO>;
  }
  __device__ Element* smem_do(int stage) const {
    return smem.dO.data() + stage * cosize_v<typename Traits::SmemLayoutQdO>;
  }
  __device__ Element* smem_k() const { return smem.k.data(); }
  __device__ Element* smem_v() const { return smem.v.data(); }
  __device__ Element* smem_p() const { return smem.p.data(); }
  __device__ Element* smem_ds() const { return smem.ds.data(); }

  __device__ void load_q(int m_block, int stage) const {
    const int64_t m0 = int64_t(m_block) * kBlockM;
    load_tile_async<Traits, kBlockM, typename Traits::SmemLayoutQdO>(
        q_ptr + m0 * p.q_row_stride, p.q_row_stride, q_len - static_cast<int>(m0), p.head_dim, smem_q(stage),
        tid);
  }
  __device__ void load_do(int m_block, int stage) const {
    const int64_t m0 = int64_t(m_block) * kBlockM;
    load_tile_async<Traits, kBlockM, typename Traits::SmemLayoutQdO>(
        do_ptr + m0 * p.do_row_stride, p.do_row_stride, q_len - static_cast<int>(m0), p.head_dim,
        smem_do(stage), tid);
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

  // LSE (natural log, from the forward) as LSE · log2(e), and D, for the thread's S rows.
  // tScS: (rows, cols) -> (row, col) coordinates of the S tile.
  template <typename TensorC, int kRows>
  __device__ void load_row_stats(TensorC const& tScS, int m_block, float (&lse_log2)[kRows],
                                 float (&dsum)[kRows]) const {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const int row = m_block * kBlockM + static_cast<int>(get<0>(tScS(r, 0)));
      const float lse = row < q_len ? lse_ptr[row] : -INFINITY;
      lse_log2[r] = lse == -INFINITY ? INFINITY : lse * kLog2e;  // no visible key: P = 0
      dsum[r] = row < q_len ? dsum_ptr[row] : 0.0f;
    }
  }

  // acc_s, acc_dp: ((2, 2), MMA_M, MMA_N) fp32 fragments of (BLK_M, BLK_N), TiledMmaSdP.
  template <typename Acc>
  __device__ void gemm_s_dp(Acc& acc_s, Acc& acc_dp, int stage) const {
    using Mma = typename Traits::TiledMmaSdP;
    using CopyN = typename Traits::SmemCopyAtom;
    Tensor sQ = make_tensor(make_smem_ptr(smem_q(stage)), typename Traits::SmemLayoutQdO{});  // (BLK_M, HDIM)
    Tensor sdO =
        make_tensor(make_smem_ptr(smem_do(stage)), typename Traits::SmemLayoutQdO{});   // (BLK_M, HDIM)
    Tensor sK = make_tensor(make_smem_ptr(smem_k()), typename Traits::SmemLayoutKV{});  // (BLK_N, HDIM)
    Tensor sV = make_tensor(make_smem_ptr(smem_v()), typename Traits::SmemLayoutKV{});  // (BLK_N, HDIM)
    gemm_smem<Mma, CopyN, CopyN>(acc_s, sQ, sQ, sK, sK, tid);
    gemm_smem<Mma, CopyN, CopyN>(acc_dp, sdO, sdO, sV, sV, tid);
  }

  // P ∘ Z and dS (fp32 fragments of TiledMmaSdP) -> 16-bit shared tiles (BLK_M, BLK_N).
  template <typename Acc>
  __device__ void store_p_ds(Acc const& acc_p, Acc const& acc_ds, bool store_p) const {
    using Mma = typename Traits::TiledMmaSdP;
    Mma mma;
    auto copy_r2s = make_tiled_copy_C(typename Traits::SmemCopyAtomPdS{}, mma);
    auto thr_r2s = copy_r2s.get_thread_slice(tid);
    Tensor sP = make_tensor(make_smem_ptr(smem_p()), typename Traits::SmemLayoutPdS{});    // (BLK_M, BLK_N)
    Tensor sdS = make_tensor(make_smem_ptr(smem_ds()), typename Traits::SmemLayoutPdS{});  // (BLK_M, BLK_N)
    if (store_p) {
      Tensor rP = convert_fragment<Element>(acc_p);  // ((2, 2), MMA_M, MMA_N)
      copy(copy_r2s, thr_r2s.retile_S(rP), thr_r2s.partition_D(sP));
    }
    Tensor rdS = convert_fragment<Element>(acc_ds);  // ((2, 2), MMA_M, MMA_N)
    copy(copy_r2s, thr_r2s.retile_S(rdS), thr_r2s.partition_D(sdS));
  }

  // acc_dv: ((2, 2), MMA_N', MMA_D) fp32 of (BLK_N, HDIM), TiledMmadKV: dV += Pᵀ·dO.
  template <typename Acc>
  __device__ void gemm_dv(Acc& acc_dv, int stage) const {
    using Mma = typename Traits::TiledMmadKV;
    using CopyT = typename Traits::SmemCopyAtomTransposed;
    Tensor sPt = make_tensor(make_smem_ptr(smem_p()), typename Traits::SmemLayoutPdSt{});  // (BLK_N, BLK_M)
    Tensor fPt = make_tensor(make_smem_ptr(smem_p()), typename Traits::SmemLayoutPdStNoSwizzle{});
    Tensor sdOt =
        make_tensor(make_smem_ptr(smem_do(stage)), typename Traits::SmemLayoutQdOt{});  // (HDIM, BLK_M)
    Tensor fdOt = make_tensor(make_smem_ptr(smem_do(stage)), typename Traits::SmemLayoutQdOtNoSwizzle{});
    gemm_smem<Mma, CopyT, CopyT>(acc_dv, sPt, fPt, sdOt, fdOt, tid);
  }

  // acc_dk: like acc_dv: dK += dSᵀ·Q (dS with respect to the scaled score; scale applied at the end).
  template <typename Acc>
  __device__ void gemm_dk(Acc& acc_dk, int stage) const {
    using Mma = typename Traits::TiledMmadKV;
    using CopyT = typename Traits::SmemCopyAtomTransposed;
    Tensor sdSt = make_tensor(make_smem_ptr(smem_ds()), typename Traits::SmemLayoutPdSt{});  // (BLK_N, BLK_M)
    Tensor fdSt = make_tensor(make_smem_ptr(smem_ds()), typename Traits::SmemLayoutPdStNoSwizzle{});
    Tensor sQt =
        make_tensor(make_smem_ptr(smem_q(stage)), typename Traits::SmemLayoutQdOt{});  // (HDIM, BLK_M)
    Tensor fQt = make_tensor(make_smem_ptr(smem_q(stage)), typename Traits::SmemLayoutQdOtNoSwizzle{});
    gemm_smem<Mma, CopyT, CopyT>(acc_dk, sdSt, fdSt, sQt, fQt, tid);
  }

  // acc_dq: ((2, 2), MMA_M, MMA_D) fp32 of (BLK_M, HDIM), TiledMmadQ: dQ += dS·K.
  template <typename Acc>
  __device__ void gemm_dq(Acc& acc_dq) const {
    using Mma = typename Traits::TiledMmadQ;
    Tensor sdS = make_tensor(make_smem_ptr(smem_ds()), typename Traits::SmemLayoutPdS{});  // (BLK_M, BLK_N)
    Tensor sKt = make_tensor(make_smem_ptr(smem_k()), typename Traits::SmemLayoutKt{});    // (HDIM, BLK_N)
    Tensor fKt = make_tensor(make_smem_ptr(smem_k()), typename Traits::SmemLayoutKtNoSwizzle{});
    gemm_smem<Mma, typename Traits::SmemCopyAtom, typename Traits::SmemCopyAtomTransposed>(acc_dq, sdS, sdS,
                                                                                           sKt, fKt, tid);
  }
};

}  // namespace sm80
}  // namespace flashlab
