// src/cuda/sm90/epilogue_fwd.h — write O and LSE of the Hopper forward.
//
// Each consumer warpgroup stores its own 64 rows, without waiting for the other warpgroups: O is
// converted to 16 bits, written into the warpgroup's rows of the staging tile (O's own where it
// fits, else Q's: its own Q·Kᵀ products, the only readers of those rows, have retired), and after
// a warpgroup-wide named barrier one thread stores the warpgroup's 64 rows with a TMA store (the
// tensor's bounds drop rows past the sequence and columns past head_dim). LSE: the first thread of
// each quad (the four hold the same rows) writes its two rows.
// Arguments: common::FwdOutputArgs and the sequence sizes; Params: O's TMA descriptor and LSE.
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>

#include <cute/arch/copy_sm90_tma.hpp>
#include <cutlass/arch/barrier.h>

#include "cuda/common/kernel_args.h"
#include "cuda/common/tile_scheduler.h"
#include "cuda/sm90/fragments.h"
#include "cuda/sm90/kernel_traits.h"
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
  using ShapeQKV = typename Traits::ShapeQKV;
  using StrideQKV = typename Traits::StrideQKV;

  struct Arguments {
    common::FwdOutputArgs out;
    common::SeqArgs seq;
  };
  struct Params {
    typename Traits::TmaO tma_o;
    ShapeQKV shape_o;
    float* lse;
    int64_t lse_batch_stride, lse_head_stride;
  };
  // Host: O's descriptor, (seqlen_q, d, heads_q, batch) with the caller's strides (api_sm90.cpp
  // checked them against TMA's rules).
  static Params to_params(const Arguments& a) {
    const common::FwdOutputArgs& o = a.out;
    const ShapeQKV shape{a.seq.seqlen_q, o.head_dim, a.seq.heads_q, a.seq.batch};
    const StrideQKV stride{tma_legal_stride(o.o_row_stride, a.seq.seqlen_q), _1{},
                           tma_legal_stride(o.o_head_stride, a.seq.heads_q),
                           tma_legal_stride(o.o_batch_stride, a.seq.batch)};
    Tensor g = make_tensor(make_gmem_ptr(static_cast<Element*>(o.o)), shape, stride);
    return Params{make_tma_copy(SM90_TMA_STORE{}, g, typename Traits::SmemLayoutOSlab{}, Shape<_64, Int<kHeadDim>>{},
                                _1{}),
                  shape, o.lse, o.lse_batch_stride, o.lse_head_stride};
  }
  CUTE_DEVICE static void prefetch_descriptors(const Params& p) { prefetch_tma_descriptor(p.tma_o.get_tma_descriptor()); }

  float* lse_ptr;  // LSE of row 0 of the tile; null: not requested
  int m_block, head, batch;
  int q_rows;  // valid rows of the tile (may exceed kBlockM)
  CUTE_DEVICE EpilogueFwd(const Params& p, const common::WorkTile& t)
      : m_block(t.m_block), head(t.head), batch(t.batch) {
    const int64_t m0 = int64_t(t.m_block) * kBlockM;
    lse_ptr = p.lse ? p.lse + t.lse_offset(p.lse_batch_stride, p.lse_head_stride) + m0 : nullptr;
    q_rows = t.q_len - static_cast<int>(m0);
  }

  // The thread of a warpgroup that issues its TMA stores (and waits for them).
  CUTE_DEVICE static bool is_issuer(int mma_tid) { return mma_tid % kWarpGroupThreads == 0; }

  // acc_o: this thread's ((2, 2, HDIM/8), 1, 1) fp32 fragment, normalized; lse: its two rows.
  // smem_o: the CTA's (BLK_M, HDIM) staging tile. Every thread of the calling warpgroup calls this.
  template <typename AccO>
  CUTE_DEVICE void store(const Params& p, AccO const& acc_o, const float (&lse)[kRows], Element* smem_o,
                         int mma_tid) const {
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

    // ---- O: registers -> shared (this warpgroup's 64 rows) -> global by one TMA store.
    Tensor rO = make_tensor<Element>(acc_o.layout());  // ((2, 2, HDIM/8), 1, 1) 16-bit
    convert_into(acc_o, rO);
    const FwdBarrier wg_barrier = offset(FwdBarrier::kEpilogueWG1, warp_group);
    if constexpr (Traits::kSeparateO) {
      // O's own staging tile is reused by the CTA's next tile (persistent CTAs): the previous
      // store must have read the warpgroup's rows before they are overwritten.
      if (is_issuer(mma_tid)) tma_store_wait<0>();
      named_barrier_sync(kWarpGroupThreads, wg_barrier);
    }
    Tensor sO = make_tensor(make_smem_ptr(smem_o), typename Traits::SmemLayoutO{});  // (BLK_M, HDIM)
    auto copy_r2s = make_tiled_copy_C(Copy_Atom<AutoVectorizingCopyWithAssumedAlignment<32>, Element>{}, mma);
    auto thr_r2s = copy_r2s.get_thread_slice(mma_tid);
    copy(copy_r2s, thr_r2s.retile_S(rO), thr_r2s.partition_D(sO));
    // The generic-proxy writes above, visible to the TMA (async proxy) once all 128 threads made theirs.
    cutlass::arch::fence_view_async_shared();
    named_barrier_sync(kWarpGroupThreads, wg_barrier);
    if (is_issuer(mma_tid)) {
      // The slab's first element: the unswizzled offset of row 64 w (whole atoms: the swizzle keeps it).
      Element* slab = smem_o + typename Traits::SmemLayoutO{}.layout_b()(make_coord(warp_group * 64, 0));
      Tensor sOw = make_tensor(make_smem_ptr(slab), typename Traits::SmemLayoutOSlab{});  // (64, HDIM)
      Tensor mO = p.tma_o.get_tma_tensor(p.shape_o)(_, _, head, batch);  // (seqlen_q, d)
      Tensor gO = local_tile(mO, Shape<_64, Int<kHeadDim>>{},
                             make_coord(m_block * Traits::kMmaWarpGroups + warp_group, _0{}));  // (64, HDIM)
      auto [tOgO, tOsO] = tma_partition(p.tma_o, _0{}, Layout<_1>{}, group_modes<0, 2>(sOw),
                                        group_modes<0, 2>(gO));  // gmem (TMA), smem (TMA)
      // Rows past the sequence and columns past head_dim lie outside O's tensor: TMA skips them.
      copy(p.tma_o, tOsO, tOgO);
      tma_store_arrive();
      // Staged in Q's tile, O must have left it before the kernel releases Q (release_q).
      if constexpr (!Traits::kSeparateO) tma_store_wait<0>();
    }
  }

  // Before the CTA exits: its last stores have read their shared memory.
  CUTE_DEVICE static void drain(int mma_tid) {
    if (is_issuer(mma_tid)) tma_store_wait<0>();
  }
};

}  // namespace sm90
}  // namespace flashlab
