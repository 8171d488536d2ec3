// src/cuda/sm90/mainloop_bwd.h — the Hopper backward's loads and matrix products.
//
// Producer side (one elected thread): K(n) and V(n) once onto barrier_kv, then Q(m), dO(m) and the
// block's LSE · log2(e) and D (a bulk copy of its row_stats tile, common/bwd_workspace.h) for every
// query block m that sees the key block, through one 2-stage TMA pipeline (all three on the
// stage's barrier).
// Consumer side (one warpgroup, its 64 keys): the five products of bwd_kernel_traits.h, issued
// here and waited for by the kernel (flash_bwd_kernel.h). The shared-memory operands are the
// warpgroup's slices (local_tile) of the shared tiles, fixed when the mainloop is constructed.
// Arguments: common::BwdInputArgs and the sequence sizes; Params: the four TMA descriptors (Q, dO,
// K, V), built on the host.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cute/tensor.hpp>

#include <cutlass/arch/barrier.h>

#include "cuda/common/bwd_workspace.h"  // row_stats tiles
#include "cuda/common/kernel_args.h"
#include "cuda/common/tile_scheduler.h"
#include "cuda/sm90/fragments.h"
#include "cuda/sm90/kernel_traits.h"  // tma_legal_stride
#include "cuda/sm90/pipeline.h"
#include "cuda/sm90/varlen.h"

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
  using Pipeline = PipelineTmaAsyncWarpgroupRelease<kStages, true>;
  using PipelineState = typename Pipeline::PipelineState;

  struct Arguments {
    common::BwdInputArgs in;
    common::SeqArgs seq;
    common::BwdRowArgs rows;
  };
  struct Params {
    typename Traits::TmaQ tma_q, tma_do;
    typename Traits::TmaKV tma_k, tma_v;
    ShapeQKV shape_q, shape_k;
    int kv_group;
    const float* row_stats;  // common::BwdRowArgs::row_stats (kBlockM-row tiles of LSE · log2(e), D)
    int seqlen_q, heads_q;
    const int32_t* cu_seqlens_q;
    const int32_t* cu_seqlens_k;
  };
  static constexpr int kStatsFloats = 2 * kBlockM;  // a row_stats tile: one query block's LSE, D
  static constexpr uint32_t kStatsBytes = kStatsFloats * sizeof(float);  // one bulk copy per stage
  static constexpr int kDqBufferFloats = kBlockM * Traits::kDqCols;  // one dq_accum slab

  struct Empty {};
  struct SharedStorage {
    array_aligned<Element, cosize_v<typename Traits::SmemLayoutQ>, 1024> q;     // (BLK_M, HDIM, STAGES)
    array_aligned<Element, cosize_v<typename Traits::SmemLayoutQ>, 1024> dO;    // (BLK_M, HDIM, STAGES)
    array_aligned<Element, cosize_v<typename Traits::SmemLayoutK>, 1024> k;     // (BLK_N, HDIM)
    array_aligned<Element, cosize_v<typename Traits::SmemLayoutK>, 1024> v;     // (BLK_N, HDIM)
    array_aligned<Element, cosize_v<typename Traits::SmemLayoutdSt>, 1024> ds;  // dSᵀ (BLK_N, BLK_M, DS_STAGES)
    // D 256 only: Pᵀ, as dSᵀ (the A operand of dV comes from shared memory there).
    std::conditional_t<Traits::kWide, array_aligned<Element, cosize_v<typename Traits::SmemLayoutPt>, 1024>, Empty> pt;
    // Per stage: the query block's LSE · log2(e) and D (one row_stats tile, with Q and dO).
    array_aligned<float, kStatsFloats * kStages, 128> stats;
    // Per dQ slab: the CTA's contribution of one query block (64 × kDqCols fp32, in DqAccumOrder),
    // handed to the writer warp (flash_bwd_kernel.h, write_dq). None at D 256: there dQ borrows
    // the stage's Q and dO buffers (write_dq_wide).
    std::conditional_t<Traits::kWide, Empty, array_aligned<float, kDqBufferFloats * Traits::kDqSlabs, 128>> dq;
    cutlass::arch::ClusterTransactionBarrier barrier_kv;
    typename Pipeline::SharedStorage pipeline_qdo;
  };

  // Host: the descriptors, (rows, head_dim, heads, batch). Each describes at least one row: TMA
  // refuses an empty tensor, and a length of 0 (a varlen maximum or total) must still give
  // dK = dV = 0 or dQ = 0 without loading anything. Varlen: the packed tensors as one batch entry
  // of total rows, each tile offset by its sequence's first row (as the forward: mainloop_fwd.h);
  // the next sequence's rows that a boundary block loads are zeroed by the consumers
  // (zero_rows_from, varlen.h; flash_bwd_kernel.h) before any product reads them.
  static Params to_params(const Arguments& a) {
    const common::SeqArgs& s = a.seq;
    const common::BwdInputArgs& in = a.in;
    const bool varlen = s.cu_seqlens_q != nullptr;
    const int heads_kv = s.heads_q / in.kv_group;
    auto at_least_1 = [](int64_t rows) { return static_cast<int>(rows > 0 ? rows : 1); };
    const int rows_q = at_least_1(varlen ? in.total_q : s.seqlen_q);
    const int rows_k = at_least_1(varlen ? in.total_k : s.seqlen_k);
    const int batch = varlen ? 1 : s.batch;
    const ShapeQKV shape_q{rows_q, in.head_dim, s.heads_q, batch};
    const ShapeQKV shape_k{rows_k, in.head_dim, heads_kv, batch};
    auto gmem = [&](const void* ptr, const ShapeQKV& shape, int64_t row, int64_t head, int64_t batch) {
      const StrideQKV stride{tma_legal_stride(row, get<0>(shape)), _1{},
                             tma_legal_stride(head, get<2>(shape)), tma_legal_stride(batch, get<3>(shape))};
      return make_tensor(make_gmem_ptr(static_cast<Element const*>(ptr)), shape, stride);
    };
    auto desc_q = [&](const void* ptr, int64_t row, int64_t head, int64_t batch) {
      return make_tma_copy(SM90_TMA_LOAD{}, gmem(ptr, shape_q, row, head, batch),
                           take<0, 2>(typename Traits::SmemLayoutQ{}), typename Traits::TileQ{}, _1{});
    };
    auto desc_kv = [&](const void* ptr, int64_t row, int64_t head, int64_t batch) {
      return make_tma_copy(SM90_TMA_LOAD{}, gmem(ptr, shape_k, row, head, batch),
                           typename Traits::SmemLayoutK{}, typename Traits::TileKV{}, _1{});
    };
    return Params{desc_q(in.q, in.q_row_stride, in.q_head_stride, in.q_batch_stride),
                  desc_q(in.dout, in.do_row_stride, in.do_head_stride, in.do_batch_stride),
                  desc_kv(in.k, in.k_row_stride, in.k_head_stride, in.k_batch_stride),
                  desc_kv(in.v, in.v_row_stride, in.v_head_stride, in.v_batch_stride),
                  shape_q,
                  shape_k,
                  in.kv_group,
                  a.rows.row_stats,
                  s.seqlen_q,
                  s.heads_q,
                  s.cu_seqlens_q,
                  s.cu_seqlens_k};
  }

  CUTE_DEVICE static void prefetch_descriptors(const Params& p) {
    prefetch_tma_descriptor(p.tma_q.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_do.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_k.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_v.get_tma_descriptor());
  }

  // ---- barrier_kv: initialized and armed (one arrival, the K and V bytes expected) by one thread
  // before the kernel's __syncthreads, so every consumer's wait comes after the arrival in a
  // barrier-ordered way (compute-sanitizer's racecheck reported the arrival after a consumer's
  // try_wait as a potential WAR hazard when load() armed it). A CTA that loads nothing leaves it
  // armed and unwaited.
  CUTE_DEVICE static void init_kv_barrier(SharedStorage& smem) {
    smem.barrier_kv.init(/*arrive_count=*/1);
    smem.barrier_kv.arrive_and_expect_tx(2 * Traits::kTmaBytesKV);
  }

  // ---- Producer: one thread. K(n), V(n), then Q(m), dO(m) for m in [m_min, m_max).
  // kVarlen: the kernel's (cu_seqlens given; the descriptors hold the packed tensors as one batch entry).
  template <bool kVarlen>
  CUTE_DEVICE static void load(const Params& p, const common::WorkTile& t, int n_block, int m_min, int m_max,
                               Pipeline& pipeline, SharedStorage& smem) {
    Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQ{});
    Tensor sdO = make_tensor(make_smem_ptr(smem.dO.data()), typename Traits::SmemLayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Traits::SmemLayoutK{});
    Tensor sV = make_tensor(make_smem_ptr(smem.v.data()), typename Traits::SmemLayoutK{});
    const int head_kv = t.head / p.kv_group;
    using TileQ = typename Traits::TileQ;
    using TileKV = typename Traits::TileKV;
    // The sequence's batch entry, or (varlen) its first packed row, read from cu_seqlens here (as
    // mainloop_fwd.h's coords(): the producer lives on 24 registers).
    const int q_seq = kVarlen ? p.cu_seqlens_q[t.batch] : t.batch;
    const int k_seq = kVarlen ? p.cu_seqlens_k[t.batch] : t.batch;
    Tensor gQ = local_tile(sequence_rows(p.tma_q.get_tma_tensor(p.shape_q), t.head, q_seq, kVarlen), TileQ{},
                           make_coord(_, _0{}));
    Tensor gdO = local_tile(sequence_rows(p.tma_do.get_tma_tensor(p.shape_q), t.head, q_seq, kVarlen), TileQ{},
                            make_coord(_, _0{}));
    Tensor gK = local_tile(sequence_rows(p.tma_k.get_tma_tensor(p.shape_k), head_kv, k_seq, kVarlen), TileKV{},
                           make_coord(n_block, _0{}));
    Tensor gV = local_tile(sequence_rows(p.tma_v.get_tma_tensor(p.shape_k), head_kv, k_seq, kVarlen), TileKV{},
                           make_coord(n_block, _0{}));
    auto [tQg, tQs] =
        tma_partition(p.tma_q, _0{}, Layout<_1>{}, group_modes<0, 2>(sQ), group_modes<0, 2>(gQ));
    auto [tdOg, tdOs] =
        tma_partition(p.tma_do, _0{}, Layout<_1>{}, group_modes<0, 2>(sdO), group_modes<0, 2>(gdO));
    auto [tKg, tKs] =
        tma_partition(p.tma_k, _0{}, Layout<_1>{}, group_modes<0, 2>(sK), group_modes<0, 2>(gK));
    auto [tVg, tVs] =
        tma_partition(p.tma_v, _0{}, Layout<_1>{}, group_modes<0, 2>(sV), group_modes<0, 2>(gV));

    // Rows past the sequence and columns past head_dim arrive as zeros (the byte count is the
    // whole box's either way): S, dP and their products see exact zeros there. barrier_kv was
    // armed for these bytes before the kernel's __syncthreads (init_kv_barrier).
    uint64_t& kv = reinterpret_cast<uint64_t&>(smem.barrier_kv);
    copy(p.tma_k.with(kv, 0), tKg, tKs);
    copy(p.tma_v.with(kv, 0), tVg, tVs);
    PipelineState state = cutlass::make_producer_start_state<Pipeline>();
    // Not unrolled: the producer lives on 24 registers (setmaxnreg); see mainloop_fwd.h.
    CUTE_NO_UNROLL
    for (int m = m_min; m < m_max; ++m) {
      pipeline.producer_acquire(state);
      uint64_t* full = pipeline.producer_get_barrier(state);
      copy(p.tma_q.with(*full, 0), tQg(_, m), tQs(_, state.index()));
      copy(p.tma_do.with(*full, 0), tdOg(_, m), tdOs(_, state.index()));
      SM90_BULK_COPY_G2S::copy(
          p.row_stats + common::row_stats_tile_offset(t.batch, m, t.head, p.seqlen_q, p.heads_q, kBlockM), full,
          smem.stats.data() + state.index() * kStatsFloats, kStatsBytes);
      ++state;
    }
    pipeline.producer_tail(state);  // do not retire while a consumer may still arrive
  }

  // ---- Consumer: the operands of one thread (wtid in [0, 128)) of consumer warpgroup wg.
  typename Traits::TiledMmaSdP mma_sdp;
  typename Traits::TiledMmadKV mma_dkv;
  typename Traits::TiledMmadQ mma_dq;
  template <typename Layout>
  CUTE_HOST_DEVICE static auto smem_tensor(Element* ptr) {
    return make_tensor(make_smem_ptr(ptr), Layout{});
  }
  // The warpgroup's 64 rows of K or V: (64, HDIM) (D 256: all of them).
  template <typename TensorT>
  CUTE_HOST_DEVICE static auto keys_of(TensorT&& t, int wg) {
    return local_tile(t, Shape<_64, Int<Traits::kHeadDim>>{}, make_coord(Traits::kWide ? 0 : wg, _0{}));
  }
  // The warpgroup's rows of a Q / dO stage: all 64, or (D 256) rows [32 wg, +32).
  template <typename TensorT>
  CUTE_HOST_DEVICE static auto queries_of(TensorT&& t, int wg) {
    return local_tile(t, Shape<Int<Traits::kQueriesPerWarpGroup>, Int<Traits::kHeadDim>>{},
                      make_coord(Traits::kWide ? wg : 0, _0{}));
  }
  // The operands are rebuilt from the shared-memory addresses at each issue rather than kept as
  // members: six GMMA descriptors held across the loop cost registers the accumulators need
  // (ptxas spilled with them, D 128).
  SharedStorage& smem;
  const int wtid, wg;
  CUTE_DEVICE MainloopBwd(SharedStorage& smem_, int wtid_, int wg_) : smem(smem_), wtid(wtid_), wg(wg_) {}

  // Sᵀ = K_w·Q(stage)ᵀ, dPᵀ = V_w·dO(stage)ᵀ: one batch each, issued (the caller waits).
  template <typename Acc>
  CUTE_DEVICE void issue_s(int stage, Acc& acc_s) {
    gemm_issue</*kZeroInit=*/true, /*kARegisters=*/false>(mma_sdp, sdp_a(smem.k.data()), sdp_b(smem.q.data(), stage),
                                                          acc_s);
  }
  template <typename Acc>
  CUTE_DEVICE void issue_dp(int stage, Acc& acc_dp) {
    gemm_issue<true, false>(mma_sdp, sdp_a(smem.v.data()), sdp_b(smem.dO.data(), stage), acc_dp);
  }
  // dV += Pᵀ·dO(stage) and dK += dSᵀ·Q(stage), Pᵀ and dSᵀ from registers: `pt` and `dst` are the
  // A-operand views of their 16-bit copies (RS).
  template <typename FragA, typename Acc>
  CUTE_DEVICE void issue_dv(int stage, FragA const& pt, Acc& acc_dv) {
    gemm_issue</*kZeroInit=*/false, /*kARegisters=*/true>(mma_dkv, pt, dkv_b(smem.dO.data(), stage), acc_dv);
  }
  template <typename FragA, typename Acc>
  CUTE_DEVICE void issue_dk(int stage, FragA const& dst, Acc& acc_dk) {
    gemm_issue<false, true>(mma_dkv, dst, dkv_b(smem.q.data(), stage), acc_dk);
  }
  // D 256: the same two products with Pᵀ and dSᵀ (both warpgroups' queries) from shared memory
  // (SS), onto the warpgroup's half of the head dim.
  template <typename Acc>
  CUTE_DEVICE void issue_dv_smem(int stage, int ps_stage, Acc& acc_dv) {
    gemm_issue<false, false>(mma_dkv, dkv_a(smem.pt.data(), ps_stage), dkv_b(smem.dO.data(), stage), acc_dv);
  }
  template <typename Acc>
  CUTE_DEVICE void issue_dk_smem(int stage, int ps_stage, Acc& acc_dk) {
    gemm_issue<false, false>(mma_dkv, dkv_a(smem.ds.data(), ps_stage), dkv_b(smem.q.data(), stage), acc_dk);
  }
  // The shared-memory operands: K_w or V_w (A of Sᵀ, dPᵀ); Q or dO of a stage (B of Sᵀ, dPᵀ); their
  // transposes (B of dK, dV).
  CUTE_DEVICE auto sdp_a(Element* ptr) {
    return mma_sdp.get_thread_slice(wtid).partition_fragment_A(
        keys_of(smem_tensor<typename Traits::SmemLayoutK>(ptr), wg));
  }
  CUTE_DEVICE auto sdp_b(Element* ptr, int stage) {
    return mma_sdp.get_thread_slice(wtid).partition_fragment_B(
        queries_of(smem_tensor<typename Traits::SmemLayoutQ>(ptr)(_, _, stage), wg));
  }
  // Qᵀ or dOᵀ of a stage: (HDIM, BLK_M), or at D 256 the warpgroup's half of the head dim.
  CUTE_DEVICE auto dkv_b(Element* ptr, int stage) {
    return mma_dkv.get_thread_slice(wtid).partition_fragment_B(
        local_tile(smem_tensor<typename Traits::SmemLayoutQt>(ptr)(_, _, stage),
                   Shape<Int<Traits::kDkvCols>, Int<kBlockM>>{}, make_coord(Traits::kWide ? wg : 0, _0{})));
  }
  // D 256: Pᵀ or dSᵀ of a buffer stage, (BLK_N, BLK_M), K-major (queries contiguous).
  CUTE_DEVICE auto dkv_a(Element* ptr, int ps_stage) {
    return mma_dkv.get_thread_slice(wtid).partition_fragment_A(
        smem_tensor<typename Traits::SmemLayoutdSt>(ptr)(_, _, ps_stage));
  }
  // dQ from dS in shared memory (SS). kDqSplit: dQ[:, half wg] = dS (all 128 keys)·K[:, half wg].
  // Else dQ_w = dS_w·K_w over the warpgroup's 64 keys.
  template <typename Acc>
  CUTE_DEVICE void issue_dq(int ds_stage, Acc& acc_dq) {
    Tensor sKt = smem_tensor<typename Traits::SmemLayoutKt>(smem.k.data());  // (HDIM, BLK_N)
    Tensor sdS = smem_tensor<typename Traits::SmemLayoutdS>(smem.ds.data())(_, _, ds_stage);  // (BLK_M, BLK_N)
    auto thr = mma_dq.get_thread_slice(wtid);
    constexpr int kCols = Traits::kDqCols, kKeys = Traits::kDqKeys;
    // Split: columns [kCols · wg, +kCols) of Kᵀ, all keys. Else: all columns, keys [64 wg, +64).
    const int col_tile = Traits::kDqSplit ? wg : 0, key_tile = Traits::kDqSplit ? 0 : wg;
    Tensor sKtw = local_tile(sKt, Shape<Int<kCols>, Int<kKeys>>{}, make_coord(col_tile, key_tile));
    Tensor sdSw = local_tile(sdS, Shape<Int<kBlockM>, Int<kKeys>>{}, make_coord(_0{}, key_tile));
    gemm_issue</*kZeroInit=*/true, /*kARegisters=*/false>(mma_dq, thr.partition_fragment_A(sdSw),
                                                          thr.partition_fragment_B(sKtw), acc_dq);
  }
};

}  // namespace sm90
}  // namespace flashlab
