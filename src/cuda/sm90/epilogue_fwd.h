// src/cuda/sm90/epilogue_fwd.h — write O and LSE of the Hopper forward.
//
// Each consumer warpgroup stores its own 64 rows, without waiting for the other warpgroups: O is
// converted to 16 bits, written into the warpgroup's rows of the staging tile (O's own where it
// fits, else Q's: its own Q·Kᵀ products, the only readers of those rows, have retired), read back
// after a warpgroup-wide named barrier in 16-byte row segments, and stored to global memory with row and column predicates
// (rows past the sequence, columns past head_dim). LSE: the first thread of each quad (the four
// hold the same rows) writes its two rows.
// Arguments: common::FwdOutputArgs; Params: the same.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cute/tensor.hpp>

#include "cuda/common/kernel_args.h"
#include "cuda/common/tile_scheduler.h"
#include "cuda/sm90/fragments.h"
#include "cuda/sm90/pipeline.h"

namespace flashlab {
namespace sm90 {

using namespace cute;

template <typename Traits>
struct EpilogueFwd {
  using Element = typename Traits::Element;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr int kRows = Traits::kRowsPerThread;
  static constexpr int kWarpGroupThreads = cutlass::NumThreadsPerWarpGroup;

  using Arguments = common::FwdOutputArgs;
  using Params = common::FwdOutputArgs;
  static Params to_params(const Arguments& a) { return a; }

  Element* o_ptr;  // row 0 of this CTA's query block
  int64_t o_row_stride;
  float* lse_ptr;  // LSE of row 0 of this CTA's query block; null: not requested
  int q_rows;      // valid rows from o_ptr on (may exceed kBlockM)
  int head_dim;

  CUTE_DEVICE EpilogueFwd(const Params& p, const common::WorkTile& t)
      : o_row_stride(p.o_row_stride), head_dim(p.head_dim) {
    const int64_t m0 = int64_t(t.m_block) * kBlockM;
    o_ptr = static_cast<Element*>(p.o) + t.q_offset(p.o_batch_stride, p.o_row_stride, p.o_head_stride, m0, t.head);
    lse_ptr = p.lse ? p.lse + t.lse_offset(p.lse_batch_stride, p.lse_head_stride) + m0 : nullptr;
    q_rows = t.q_len - static_cast<int>(m0);
  }

  // acc_o: this thread's ((2, 2, HDIM/8), 1, 1) fp32 fragment, normalized; lse: its two rows.
  // smem_o: the CTA's (BLK_M, HDIM) staging tile. Every thread of the calling warpgroup calls this.
  template <typename AccO>
  CUTE_DEVICE void store(AccO const& acc_o, const float (&lse)[kRows], Element* smem_o, int mma_tid) const {
    typename Traits::TiledMmaPV mma;
    auto thr_mma = mma.get_thread_slice(mma_tid);
    const int warp_group = mma_tid / kWarpGroupThreads;

    // ---- LSE, from the accumulator's coordinates (rows of the CTA tile, columns of the thread).
    Tensor cO = make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{});  // (BLK_M, HDIM) -> (row, col)
    Tensor tOcO = rowcol_view(thr_mma.partition_C(cO));                      // (rows, cols) -> (row, col)
    if (lse_ptr != nullptr && get<1>(tOcO(0, 0)) == 0) {
      CUTE_UNROLL
      for (int r = 0; r < kRows; ++r) {
        const int row = static_cast<int>(get<0>(tOcO(r, 0)));
        if (row < q_rows) lse_ptr[row] = lse[r];
      }
    }

    // ---- O: registers -> shared (this warpgroup's rows) -> global.
    Tensor rO = make_tensor<Element>(acc_o.layout());  // ((2, 2, HDIM/8), 1, 1) 16-bit
    convert_into(acc_o, rO);
    // A staging tile of its own is reused by the CTA's next tile (persistent CTAs): the
    // warpgroup's reads of the previous tile's rows are over before they are overwritten.
    if constexpr (Traits::kSeparateO) named_barrier_sync(kWarpGroupThreads, offset(FwdBarrier::kEpilogueWG1, warp_group));
    Tensor sO = make_tensor(make_smem_ptr(smem_o), typename Traits::SmemLayoutO{});  // (BLK_M, HDIM)
    // stmatrix: four 8 x 8 16-bit matrices a warp, 16 bytes a thread (4-byte stores: 4x the
    // instructions and 2-way bank conflicts; docs/perf.md, session 13). Not at hdim 256, where
    // it spilled 8 bytes (ptxas): 4-byte stores there.
    using R2S = std::conditional_t<(kHeadDim < 256), SM90_U32x4_STSM_N, AutoVectorizingCopyWithAssumedAlignment<32>>;
    auto copy_r2s = make_tiled_copy_C(Copy_Atom<R2S, Element>{}, mma);
    auto thr_r2s = copy_r2s.get_thread_slice(mma_tid);
    copy(copy_r2s, thr_r2s.retile_S(rO), thr_r2s.partition_D(sO));
    // The 16-byte segments read below mix values written by the warpgroup's four warps.
    named_barrier_sync(kWarpGroupThreads, offset(FwdBarrier::kEpilogueWG1, warp_group));

    Tensor sOw = local_tile(sO, Shape<_64, Int<kHeadDim>>{}, make_coord(warp_group, _0{}));  // (64, HDIM)
    Tensor gO = make_tensor(make_gmem_ptr(o_ptr + int64_t(warp_group) * 64 * o_row_stride),
                            make_layout(Shape<_64, Int<kHeadDim>>{}, make_stride(o_row_stride, _1{})));  // (64, HDIM)
    Tensor cOw = make_identity_tensor(Shape<_64, Int<kHeadDim>>{});  // (64, HDIM) -> (row, col)
    typename Traits::GmemTiledCopyO copy_s2g;
    auto thr_s2g = copy_s2g.get_thread_slice(mma_tid % kWarpGroupThreads);
    Tensor ts = thr_s2g.partition_S(sOw);          // (CPY, CPY_M, CPY_K)
    Tensor tg = thr_s2g.partition_D(gO);           // (CPY, CPY_M, CPY_K)
    Tensor tc = thr_s2g.partition_D(cOw);          // (CPY, CPY_M, CPY_K) -> (row, col)
    Tensor tr = make_tensor<Element>(shape(tg));  // (CPY, CPY_M, CPY_K)
    copy(copy_s2g, ts, tr);
    const int rows = q_rows - warp_group * 64;
    CUTE_UNROLL
    for (int m = 0; m < size<1>(tg); ++m) {
      if (static_cast<int>(get<0>(tc(0, m, 0))) < rows) {
        CUTE_UNROLL
        for (int k = 0; k < size<2>(tg); ++k) {
          if (static_cast<int>(get<1>(tc(0, m, k))) < head_dim) copy(copy_s2g, tr(_, m, k), tg(_, m, k));
        }
      }
    }
  }
};

}  // namespace sm90
}  // namespace flashlab
