// src/cuda/sm90/mainloop_bwd.h — the Hopper backward's loads and matrix products.
//
// Producer side (one elected thread): K(n) and V(n) once (two (64, HDIM) boxes each, one per
// consumer warpgroup) onto barrier_kv, then Q(m) and dO(m) for every query block m that sees the
// key block, through one 2-stage TMA pipeline (both tiles of a step on the stage's barrier).
// Consumer side (one warpgroup, its 64 keys): the five products of bwd_kernel_traits.h, issued
// here and waited for by the kernel (flash_bwd_kernel.h).
// Arguments: common::BwdInputArgs and the sequence sizes; Params: the four TMA descriptors (Q, dO,
// K, V), built on the host.
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>

#include <cutlass/arch/barrier.h>

#include "cuda/common/kernel_args.h"
#include "cuda/common/tile_scheduler.h"
#include "cuda/sm90/fragments.h"
#include "cuda/sm90/kernel_traits.h"  // tma_legal_stride
#include "cuda/sm90/pipeline.h"

namespace flashlab {
namespace sm90 {

using namespace cute;

template <typename Traits_>
struct MainloopBwd {
  using Traits = Traits_;
  using Element = typename Traits::Element;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr int kStages = Traits::kStages;
  using ShapeQKV = typename Traits::ShapeQKV;
  using StrideQKV = typename Traits::StrideQKV;
  using Tma = typename Traits::Tma;
  using Pipeline = PipelineTmaAsyncWarpgroupRelease<kStages>;
  using PipelineState = typename Pipeline::PipelineState;

  struct Arguments {
    common::BwdInputArgs in;
    common::SeqArgs seq;
  };
  struct Params {
    Tma tma_q, tma_do, tma_k, tma_v;
    ShapeQKV shape_q, shape_k;
    int kv_group;
  };

  struct SharedStorage {
    array_aligned<Element, cosize_v<typename Traits::SmemLayoutQ>, 1024> q;     // (BLK_M, HDIM, STAGES)
    array_aligned<Element, cosize_v<typename Traits::SmemLayoutQ>, 1024> dO;    // (BLK_M, HDIM, STAGES)
    array_aligned<Element, cosize_v<typename Traits::SmemLayoutK>, 1024> k;     // (64, HDIM, 2)
    array_aligned<Element, cosize_v<typename Traits::SmemLayoutK>, 1024> v;     // (64, HDIM, 2)
    array_aligned<Element, cosize_v<typename Traits::SmemLayoutPdS>, 1024> p;   // (BLK_M, 64, 2)
    array_aligned<Element, cosize_v<typename Traits::SmemLayoutPdS>, 1024> ds;  // (BLK_M, 64, 2)
    cutlass::arch::ClusterTransactionBarrier barrier_kv;
    typename Pipeline::SharedStorage pipeline_qdo;
  };

  // Host: the descriptors. Each describes at least one row: TMA refuses an empty tensor, and
  // seqlen_q = 0 (dK = dV = 0) or seqlen_k = 0 (dQ = 0) are legal calls that load nothing.
  static Params to_params(const Arguments& a) {
    const common::SeqArgs& s = a.seq;
    const common::BwdInputArgs& in = a.in;
    const int heads_kv = s.heads_q / in.kv_group;
    const int rows_q = s.seqlen_q > 0 ? s.seqlen_q : 1;
    const int rows_k = s.seqlen_k > 0 ? s.seqlen_k : 1;
    const ShapeQKV shape_q{rows_q, in.head_dim, s.heads_q, s.batch};
    const ShapeQKV shape_k{rows_k, in.head_dim, heads_kv, s.batch};
    auto desc = [&](const void* ptr, const ShapeQKV& shape, int64_t row, int64_t head, int64_t batch) {
      const StrideQKV stride{tma_legal_stride(row, get<0>(shape)), _1{}, tma_legal_stride(head, get<2>(shape)),
                             tma_legal_stride(batch, get<3>(shape))};
      Tensor g = make_tensor(make_gmem_ptr(static_cast<Element const*>(ptr)), shape, stride);
      return make_tma_copy(SM90_TMA_LOAD{}, g, take<0, 2>(typename Traits::SmemLayoutQ{}), typename Traits::Tile{},
                           _1{});
    };
    return Params{desc(in.q, shape_q, in.q_row_stride, in.q_head_stride, in.q_batch_stride),
                  desc(in.dout, shape_q, in.do_row_stride, in.do_head_stride, in.do_batch_stride),
                  desc(in.k, shape_k, in.k_row_stride, in.k_head_stride, in.k_batch_stride),
                  desc(in.v, shape_k, in.v_row_stride, in.v_head_stride, in.v_batch_stride),
                  shape_q,
                  shape_k,
                  in.kv_group};
  }

  CUTE_DEVICE static void prefetch_descriptors(const Params& p) {
    prefetch_tma_descriptor(p.tma_q.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_do.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_k.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_v.get_tma_descriptor());
  }

  // ---- Producer: one thread. K(n), V(n), then Q(m), dO(m) for m in [m_min, m_max).
  CUTE_DEVICE static void load(const Params& p, const common::WorkTile& t, int n_block, int m_min, int m_max,
                               Pipeline& pipeline, SharedStorage& smem) {
    Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQ{});
    Tensor sdO = make_tensor(make_smem_ptr(smem.dO.data()), typename Traits::SmemLayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Traits::SmemLayoutK{});
    Tensor sV = make_tensor(make_smem_ptr(smem.v.data()), typename Traits::SmemLayoutK{});
    const int head_kv = t.head / p.kv_group;
    using TileT = typename Traits::Tile;
    // Global tiles of 64 rows: (64, HDIM, tiles).
    Tensor gQ = local_tile(p.tma_q.get_tma_tensor(p.shape_q)(_, _, t.head, t.batch), TileT{}, make_coord(_, _0{}));
    Tensor gdO = local_tile(p.tma_do.get_tma_tensor(p.shape_q)(_, _, t.head, t.batch), TileT{}, make_coord(_, _0{}));
    Tensor gK = local_tile(p.tma_k.get_tma_tensor(p.shape_k)(_, _, head_kv, t.batch), TileT{}, make_coord(_, _0{}));
    Tensor gV = local_tile(p.tma_v.get_tma_tensor(p.shape_k)(_, _, head_kv, t.batch), TileT{}, make_coord(_, _0{}));
    auto [tQg, tQs] = tma_partition(p.tma_q, _0{}, Layout<_1>{}, group_modes<0, 2>(sQ), group_modes<0, 2>(gQ));
    auto [tdOg, tdOs] = tma_partition(p.tma_do, _0{}, Layout<_1>{}, group_modes<0, 2>(sdO), group_modes<0, 2>(gdO));
    auto [tKg, tKs] = tma_partition(p.tma_k, _0{}, Layout<_1>{}, group_modes<0, 2>(sK), group_modes<0, 2>(gK));
    auto [tVg, tVs] = tma_partition(p.tma_v, _0{}, Layout<_1>{}, group_modes<0, 2>(sV), group_modes<0, 2>(gV));

    // Rows past the sequence and columns past head_dim arrive as zeros (the byte count is the
    // whole box's either way): S, dP and their products see exact zeros there.
    smem.barrier_kv.arrive_and_expect_tx(4 * Traits::kTmaBytesTile);
    uint64_t& kv = reinterpret_cast<uint64_t&>(smem.barrier_kv);
    CUTE_UNROLL
    for (int w = 0; w < Traits::kMmaWarpGroups; ++w) {
      copy(p.tma_k.with(kv, 0), tKg(_, 2 * n_block + w), tKs(_, w));
      copy(p.tma_v.with(kv, 0), tVg(_, 2 * n_block + w), tVs(_, w));
    }
    PipelineState state = cutlass::make_producer_start_state<Pipeline>();
    // Not unrolled: the producer lives on 24 registers (setmaxnreg); see mainloop_fwd.h.
    CUTE_NO_UNROLL
    for (int m = m_min; m < m_max; ++m) {
      pipeline.producer_acquire(state);
      copy(p.tma_q.with(*pipeline.producer_get_barrier(state), 0), tQg(_, m), tQs(_, state.index()));
      copy(p.tma_do.with(*pipeline.producer_get_barrier(state), 0), tdOg(_, m), tdOs(_, state.index()));
      ++state;
    }
    pipeline.producer_tail(state);  // do not retire while a consumer may still arrive
  }

  // ---- Consumer: the operands of one thread (wtid in [0, 128)) of consumer warpgroup wg.
  typename Traits::TiledMmaSdP mma_sdp;
  typename Traits::TiledMmadKV mma_dkv;
  typename Traits::TiledMmadQ mma_dq;
  template <typename Layout>
  using Smem = decltype(make_tensor(make_smem_ptr(static_cast<Element*>(nullptr)), Layout{}));
  decltype(mma_sdp.get_thread_slice(0).partition_fragment_A(Smem<typename Traits::SmemLayoutQ>{})) tSrQ, tSrdO;
  decltype(mma_sdp.get_thread_slice(0).partition_fragment_B(Smem<typename Traits::SmemLayoutK>{})) tSrK, tSrV;
  decltype(mma_dkv.get_thread_slice(0).partition_fragment_A(Smem<typename Traits::SmemLayoutPdSt>{})) tDrPt, tDrdSt;
  decltype(mma_dkv.get_thread_slice(0).partition_fragment_B(Smem<typename Traits::SmemLayoutQt>{})) tDrdOt, tDrQt;
  decltype(mma_dq.get_thread_slice(0).partition_fragment_B(Smem<typename Traits::SmemLayoutKt>{})) tQrKt;

  CUTE_DEVICE MainloopBwd(SharedStorage& smem, int wtid) {
    auto sdp = mma_sdp.get_thread_slice(wtid);
    auto dkv = mma_dkv.get_thread_slice(wtid);
    tSrQ = sdp.partition_fragment_A(make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQ{}));
    tSrdO = sdp.partition_fragment_A(make_tensor(make_smem_ptr(smem.dO.data()), typename Traits::SmemLayoutQ{}));
    tSrK = sdp.partition_fragment_B(make_tensor(make_smem_ptr(smem.k.data()), typename Traits::SmemLayoutK{}));
    tSrV = sdp.partition_fragment_B(make_tensor(make_smem_ptr(smem.v.data()), typename Traits::SmemLayoutK{}));
    tDrPt = dkv.partition_fragment_A(make_tensor(make_smem_ptr(smem.p.data()), typename Traits::SmemLayoutPdSt{}));
    tDrdSt = dkv.partition_fragment_A(make_tensor(make_smem_ptr(smem.ds.data()), typename Traits::SmemLayoutPdSt{}));
    tDrdOt = dkv.partition_fragment_B(make_tensor(make_smem_ptr(smem.dO.data()), typename Traits::SmemLayoutQt{}));
    tDrQt = dkv.partition_fragment_B(make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQt{}));
    tQrKt = mma_dq.get_thread_slice(wtid).partition_fragment_B(
        make_tensor(make_smem_ptr(smem.k.data()), typename Traits::SmemLayoutKt{}));
  }

  // S = Q(stage)·K_wᵀ and dP = dO(stage)·V_wᵀ: two batches, issued (the caller waits).
  template <typename Acc>
  CUTE_DEVICE void issue_s_dp(int stage, int wg, Acc& acc_s, Acc& acc_dp) {
    gemm_issue</*kZeroInit=*/true, /*kARegisters=*/false>(mma_sdp, tSrQ(_, _, _, stage), tSrK(_, _, _, wg), acc_s);
    gemm_issue<true, false>(mma_sdp, tSrdO(_, _, _, stage), tSrV(_, _, _, wg), acc_dp);
  }
  // dV += P_wᵀ·dO(stage) and dK += dS_wᵀ·Q(stage), from the P and dS tiles in shared memory.
  template <typename Acc>
  CUTE_DEVICE void issue_dv_dk(int stage, int wg, Acc& acc_dv, Acc& acc_dk) {
    gemm_issue<false, false>(mma_dkv, tDrPt(_, _, _, wg), tDrdOt(_, _, _, stage), acc_dv);
    gemm_issue<false, false>(mma_dkv, tDrdSt(_, _, _, wg), tDrQt(_, _, _, stage), acc_dk);
  }
  // dQ_w = dS_w·K_w, dS from registers (the A-operand view of its 16-bit copy).
  template <typename FragDs, typename Acc>
  CUTE_DEVICE void issue_dq(int wg, FragDs const& ds, Acc& acc_dq) {
    gemm_issue</*kZeroInit=*/true, /*kARegisters=*/true>(mma_dq, ds, tQrKt(_, _, _, wg), acc_dq);
  }
};

}  // namespace sm90
}  // namespace flashlab
