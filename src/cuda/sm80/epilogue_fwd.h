// src/cuda/sm80/epilogue_fwd.h — write O (the CTA's normalized accumulator) and LSE.
//
// O goes registers -> shared -> global (tile_store.h: coalesced 16-byte stores), staged where Q
// was. Rows past the sequence and columns past head_dim are not written. LSE is written by the
// first thread of each quad (all four hold the same rows).
// Arguments: common::FwdOutputArgs; Params: the same. SharedStorage: the O tile (the kernel puts it
// in a union with the mainloop's, so it lands where Q was: Q is no longer needed).
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>

#include "cuda/common/kernel_args.h"
#include "cuda/common/tile_scheduler.h"
#include "cuda/sm80/fragments.h"
#include "cuda/sm80/tile_store.h"

namespace flashlab {
namespace sm80 {

using namespace cute;

template <typename Traits>
struct EpilogueFwd {
  using Element = typename Traits::Element;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr int kRows = Traits::kRowsPerThread;

  using Arguments = FwdOutputArgs;
  using Params = FwdOutputArgs;
  static Params to_params(const Arguments& a) { return a; }

  struct SharedStorage {
    array_aligned<Element, cosize_v<typename Traits::SmemLayoutO>, 128> o;  // (BLK_M, HDIM)
  };

  Element* o_ptr;  // row 0 of this CTA's query block
  int64_t o_row_stride;
  float* lse_ptr;  // LSE of row 0 of this CTA's query block; null: not requested
  int q_rows;      // valid rows from o_ptr on (may exceed kBlockM)
  int head_dim;
  int tid;

  __device__ EpilogueFwd(const Params& p, const WorkTile& t)
      : o_row_stride(p.o_row_stride), head_dim(p.head_dim), tid(static_cast<int>(threadIdx.x)) {
    const int64_t m0 = int64_t(t.m_block) * kBlockM;
    o_ptr = static_cast<Element*>(p.o) +
            t.q_offset(p.o_batch_stride, p.o_row_stride, p.o_head_stride, m0, t.head);
    lse_ptr = p.lse ? p.lse + t.lse_offset(p.lse_batch_stride, p.lse_head_stride) + m0 : nullptr;
    q_rows = t.q_len - static_cast<int>(m0);
  }

  // acc_o: ((2, 2), MMA_M, HDIM / 8) fp32, already normalized; lse: one value per thread row.
  // Every thread of the CTA must call this (it contains a barrier).
  template <typename AccO>
  __device__ void store(AccO const& acc_o, const float (&lse)[kRows], SharedStorage& smem) const {
    typename Traits::TiledMma mma;
    auto thr_mma = mma.get_thread_slice(tid);

    // ---- LSE: rows this thread holds, from the accumulator's coordinates.
    Tensor cO = make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{});  // (BLK_M, HDIM) -> (row, col)
    Tensor tOcO = rowcol_view(thr_mma.partition_C(cO));                      // (rows, cols) -> (row, col)
    if (lse_ptr != nullptr && get<1>(tOcO(0, 0)) == 0) {  // column 0: the quad's first thread
      CUTE_UNROLL
      for (int r = 0; r < kRows; ++r) {
        const int row = get<0>(tOcO(r, 0));
        if (row < q_rows) lse_ptr[row] = lse[r];
      }
    }

    // ---- O: through shared memory (the swizzled Q layout).
    store_tile_through_smem<typename Traits::TiledMma, typename Traits::SmemLayoutO,
                            typename Traits::GmemTiledCopyO>(acc_o, 1.0f, smem.o.data(), o_ptr, o_row_stride,
                                                             q_rows, head_dim);
  }
};

}  // namespace sm80
}  // namespace flashlab
