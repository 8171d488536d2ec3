// src/cuda/sm90/mainloop_fwd.h — the Hopper forward's loads and matrix products.
//
// Producer side (one elected thread): per tile Q onto barrier_q (once the consumers released the
// previous tile's on barrier_q_empty), K(n) and V(n) for the key blocks from last to first, each
// through its own 2-stage TMA pipeline, so that Q·K(n - 1) can start while V(n) still lands.
// Consumer side (each consumer warpgroup, its 64 query rows): S = Q·Kᵀ (SS wgmma)
// and O += P·V (RS wgmma, P in registers), issued here and waited for by the kernel, which decides
// how the products overlap with the softmax (flash_fwd_kernel.h).
// Arguments: common::FwdInputArgs and the sequence sizes; Params: the TMA descriptors (built on the
// host, one CUtensorMap each, passed in the __grid_constant__ kernel parameters).
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>

#include <cutlass/arch/barrier.h>

#include "cuda/common/kernel_args.h"
#include "cuda/common/tile_scheduler.h"
#include "cuda/sm90/fragments.h"
#include "cuda/sm90/pipeline.h"
#include "cuda/sm90/varlen.h"

namespace flashlab {
namespace sm90 {

using namespace cute;

template <typename Traits_>
struct MainloopFwd {
  using Traits = Traits_;
  using Element = typename Traits::Element;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr int kStages = Traits::kStages;
  using TileQ = Shape<Int<kBlockM>, Int<kHeadDim>>;
  using TileKV = Shape<Int<kBlockN>, Int<kHeadDim>>;
  using ShapeQKV = typename Traits::ShapeQKV;
  using StrideQKV = typename Traits::StrideQKV;
  using PipelineK = PipelineTmaAsyncWarpgroupRelease<kStages>;
  using PipelineV = PipelineTmaAsyncWarpgroupRelease<kStages>;
  using PipelineState = typename PipelineK::PipelineState;

  struct Arguments {
    common::FwdInputArgs in;
    common::SeqArgs seq;
  };
  struct Params {
    typename Traits::TmaQ tma_q;
    typename Traits::TmaKV tma_k;
    typename Traits::TmaKV tma_v;
    ShapeQKV shape_q, shape_k;
    int kv_group;
    bool varlen;  // cu_seqlens: the descriptors hold the packed tensors as one batch entry
    const int32_t* cu_seqlens_q;
    const int32_t* cu_seqlens_k;
  };

  // O's staging tile where it has its own (Traits::kSeparateO), else nothing: O then goes through Q's.
  template <bool kSeparateO, typename Dummy = void>
  struct OStorage {
    array_aligned<Element, cosize_v<typename Traits::SmemLayoutO>, 1024> o;  // (BLK_M, HDIM)
  };
  template <typename Dummy>
  struct OStorage<false, Dummy> {};

  struct SharedStorage : OStorage<Traits::kSeparateO> {
    // SW128 tiles need 1024-byte alignment (the swizzle pattern repeats every 8 rows of 128 B).
    array_aligned<Element, cosize_v<typename Traits::SmemLayoutQ>, 1024> q;  // (BLK_M, HDIM)
    array_aligned<Element, cosize_v<typename Traits::SmemLayoutK>, 1024> k;  // (BLK_N, HDIM, STAGES)
    array_aligned<Element, cosize_v<typename Traits::SmemLayoutV>, 1024> v;  // (BLK_N, HDIM, STAGES)
    cutlass::arch::ClusterTransactionBarrier barrier_q;  // Q landed (the producer's TMA)
    cutlass::arch::ClusterBarrier barrier_q_empty;       // every consumer thread is done with Q
    // The tile whose Q barrier_q brings, one slot per barrier phase: {m_block, head, batch, 0};
    // m_block -1: the CTA has no more tiles. Written by the producer, read by the consumers after
    // the wait (flash_fwd_kernel.h, hand_over / handed_tile).
    alignas(16) int tile[2][4];
    typename PipelineK::SharedStorage pipeline_k;
    typename PipelineV::SharedStorage pipeline_v;

    CUTE_DEVICE Element* o_staging() {
      if constexpr (Traits::kSeparateO) {
        return this->o.data();
      } else {
        return q.data();
      }
    }
  };

  // Host: the descriptors, (rows, head_dim, heads, batch). Fixed lengths: rows = seqlen, one batch
  // entry per sequence. Varlen: the packed tensor as one batch entry of total rows (load_q /
  // load_kv offset each tile by its sequence's first row); rows of the neighbouring sequence that
  // a tile reaches are loaded, and the mask (keys) and the epilogue's row predicate (queries)
  // drop them; past the last row TMA reads zeros. A descriptor describes at least one row: TMA
  // refuses an empty tensor, and zero rows (seqlen_k = 0 is a varlen maximum; a total of 0)
  // leave every key block range empty or every tile without rows: nothing is loaded.
  static Params to_params(const Arguments& a) {
    const common::SeqArgs& s = a.seq;
    const bool varlen = s.cu_seqlens_q != nullptr;
    const int heads_kv = s.heads_q / a.in.kv_group;
    const int batch = varlen ? 1 : s.batch;
    auto at_least_1 = [](int64_t rows) { return static_cast<int>(rows > 0 ? rows : 1); };
    const int rows_q = at_least_1(varlen ? a.in.total_q : s.seqlen_q);
    const int rows_k = at_least_1(varlen ? a.in.total_k : s.seqlen_k);
    const ShapeQKV shape_q{rows_q, a.in.head_dim, s.heads_q, batch};
    const ShapeQKV shape_k{rows_k, a.in.head_dim, heads_kv, batch};
    auto stride = [&](int64_t row, int64_t head, int64_t batch_stride, int rows, int heads) {
      return StrideQKV{tma_legal_stride(row, rows), _1{}, tma_legal_stride(head, heads),
                       tma_legal_stride(batch_stride, batch)};
    };
    auto gmem = [](const void* ptr, ShapeQKV shape, StrideQKV stride) {
      return make_tensor(make_gmem_ptr(static_cast<Element const*>(ptr)), shape, stride);
    };
    const StrideQKV stride_q = stride(a.in.q_row_stride, a.in.q_head_stride, a.in.q_batch_stride, rows_q, s.heads_q);
    const StrideQKV stride_k = stride(a.in.k_row_stride, a.in.k_head_stride, a.in.k_batch_stride, rows_k, heads_kv);
    const StrideQKV stride_v = stride(a.in.v_row_stride, a.in.v_head_stride, a.in.v_batch_stride, rows_k, heads_kv);
    return Params{
        make_tma_copy(SM90_TMA_LOAD{}, gmem(a.in.q, shape_q, stride_q), typename Traits::SmemLayoutQ{}, TileQ{},
                      _1{}),
        make_tma_copy(SM90_TMA_LOAD{}, gmem(a.in.k, shape_k, stride_k), take<0, 2>(typename Traits::SmemLayoutK{}),
                      TileKV{}, _1{}),
        make_tma_copy(SM90_TMA_LOAD{}, gmem(a.in.v, shape_k, stride_v), take<0, 2>(typename Traits::SmemLayoutV{}),
                      TileKV{}, _1{}),
        shape_q,
        shape_k,
        a.in.kv_group,
        varlen,
        s.cu_seqlens_q,
        s.cu_seqlens_k};
  }

  CUTE_DEVICE static void prefetch_descriptors(const Params& p) {
    prefetch_tma_descriptor(p.tma_q.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_k.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_v.get_tma_descriptor());
  }

  // ---- Producer: one thread issues every TMA; the kernel orders the calls (per tile: K of the
  // first key block, Q once the consumers released the previous tile's, V of the first block, then
  // K(n), V(n) for the rest, last to first: the consumers' order).
  // A tile's TMA coordinates, made once per tile as few 32-bit values: the producer lives on 24
  // registers. `seq` is the descriptor's batch entry (fixed lengths) or the sequence's first
  // packed row (varlen, one batch entry); p.varlen (a kernel parameter, no register) tells which.
  // The packed rows are read from cu_seqlens again here rather than kept from the WorkTile: kept,
  // their 64-bit values stayed live through KeyBlockRange's arithmetic, and the producer spilled.
  struct TileCoords {
    int q_seq, k_seq;
    int head, kv_head, m_block;
  };
  CUTE_DEVICE static TileCoords coords(const Params& p, const common::WorkTile& t) {
    return {p.varlen ? p.cu_seqlens_q[t.batch] : t.batch, p.varlen ? p.cu_seqlens_k[t.batch] : t.batch,
            t.head, t.head / p.kv_group, t.m_block};
  }
  CUTE_DEVICE static void load_q(const Params& p, const TileCoords& c, SharedStorage& smem) {
    Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQ{});  // (BLK_M, HDIM)
    Tensor mQ = sequence_rows(p.tma_q.get_tma_tensor(p.shape_q), c.head, c.q_seq, p.varlen);  // (q_len.., d)
    Tensor gQ = local_tile(mQ, TileQ{}, make_coord(c.m_block, _0{}));                      // (BLK_M, HDIM)
    auto [tQgQ, tQsQ] = tma_partition(p.tma_q, _0{}, Layout<_1>{}, group_modes<0, 2>(sQ),
                                      group_modes<0, 2>(gQ));  // (TMA), (TMA)
    // Rows past the sequence (and columns past head_dim) arrive as zeros; the byte count is the
    // whole box's either way.
    smem.barrier_q.arrive_and_expect_tx(Traits::kTmaBytesQ);
    copy(p.tma_q.with(reinterpret_cast<uint64_t&>(smem.barrier_q), /*mcast_mask=*/0), tQgQ, tQsQ);
  }

  // K(n) (kIsV false) or V(n) (true) into the next stage of its pipeline.
  template <bool kIsV, typename Pipeline>
  CUTE_DEVICE static void load_kv(const Params& p, const TileCoords& c, int n, Pipeline& pipeline,
                                  PipelineState& state, SharedStorage& smem) {
    auto const& tma = kIsV ? p.tma_v : p.tma_k;
    Tensor s = make_tensor(make_smem_ptr(kIsV ? smem.v.data() : smem.k.data()),
                           typename Traits::SmemLayoutK{});                                 // (BLK_N, HDIM, STAGES)
    Tensor m = sequence_rows(tma.get_tma_tensor(p.shape_k), c.kv_head, c.k_seq, p.varlen);   // (k_len.., d)
    Tensor g = local_tile(m, TileKV{}, make_coord(n, _0{}));                                // (BLK_N, HDIM)
    auto [tg, ts] = tma_partition(tma, _0{}, Layout<_1>{}, group_modes<0, 2>(s), group_modes<0, 2>(g));
    pipeline.producer_acquire(state);
    copy(tma.with(*pipeline.producer_get_barrier(state), 0), tg, ts(_, state.index()));
    ++state;
  }

  // ---- Consumer: the operands of one thread of the consumer warpgroups (mma_tid in [0, kMmaThreads)).
  typename Traits::TiledMmaQK mma_qk;
  typename Traits::TiledMmaPV mma_pv;
  decltype(mma_qk.get_thread_slice(0).partition_fragment_A(
      make_tensor(make_smem_ptr(static_cast<Element*>(nullptr)), typename Traits::SmemLayoutQ{}))) tSrQ;
  decltype(mma_qk.get_thread_slice(0).partition_fragment_B(
      make_tensor(make_smem_ptr(static_cast<Element*>(nullptr)), typename Traits::SmemLayoutK{}))) tSrK;
  decltype(mma_pv.get_thread_slice(0).partition_fragment_B(
      make_tensor(make_smem_ptr(static_cast<Element*>(nullptr)), typename Traits::SmemLayoutVt{}))) tOrV;

  CUTE_DEVICE MainloopFwd(SharedStorage& smem, int mma_tid) {
    Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQ{});    // (BLK_M, HDIM)
    Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Traits::SmemLayoutK{});    // (BLK_N, HDIM, STAGES)
    Tensor sVt = make_tensor(make_smem_ptr(smem.v.data()), typename Traits::SmemLayoutVt{});  // (HDIM, BLK_N, STAGES)
    tSrQ = mma_qk.get_thread_slice(mma_tid).partition_fragment_A(sQ);   // (MMA, MMA_M, MMA_K) descriptors
    tSrK = mma_qk.get_thread_slice(mma_tid).partition_fragment_B(sK);   // (MMA, MMA_N, MMA_K, STAGES)
    tOrV = mma_pv.get_thread_slice(mma_tid).partition_fragment_B(sVt);  // (MMA, MMA_N, MMA_K, STAGES)
  }

  // Varlen, the tile's first key block when it reaches past the sequence: V's rows [valid, BLK_N)
  // of `stage` hold the next sequence's values (TMA zero-fills only past the packed tensor). P is
  // 0 there, but 0 · Inf and 0 · NaN are NaN, so a non-finite value next door would leak into
  // this sequence's O: kThreads threads (tid their index) zero those rows (zero_rows_from,
  // varlen.h) and order the stores before wgmma's async-proxy reads, after their wait on the
  // stage's full barrier (the same rule as sm80's zero-filled loads, docs/design/sm90-forward.md
  // §7). The caller then tells the readers, on FwdBarrier::kVZeroed: the consumer threads
  // themselves (flash_fwd_kernel.h, consume_tile) or the helper warps (zero_v_helper).
  template <int kThreads>
  CUTE_DEVICE static void zero_v_rows(SharedStorage& smem, int stage, int valid, int tid) {
    Tensor sV = make_tensor(make_smem_ptr(smem.v.data()), typename Traits::SmemLayoutV{});  // (BLK_N, HDIM, STAGES)
    zero_rows_from<kBlockN, kHeadDim, kThreads>(sV(_, _, stage), valid, tid);
    cutlass::arch::fence_view_async_shared();
  }

  // S = Q·K(stage)ᵀ, issued (the caller waits).
  template <typename AccS>
  CUTE_DEVICE void issue_qk(int stage, AccS& acc_s) {
    gemm_issue</*kZeroInit=*/true, /*kARegisters=*/false>(mma_qk, tSrQ, tSrK(_, _, _, stage), acc_s);
  }
  // O += P·V(stage), P: the A-operand view of a 16-bit copy of S (acc_as_a_operand), issued.
  template <typename FragP, typename AccO>
  CUTE_DEVICE void issue_pv(int stage, FragP const& p, AccO& acc_o) {
    gemm_issue</*kZeroInit=*/false, /*kARegisters=*/true>(mma_pv, p, tOrV(_, _, _, stage), acc_o);
  }
};

}  // namespace sm90
}  // namespace flashlab
