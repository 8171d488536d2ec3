// src/cuda/sm90/flash_fwd_kernel.h — the Hopper forward kernel: warp roles, and the order in which
// the consumer warpgroups issue their products and run the softmax. It computes nothing itself.
//
// Pieces (as sm80/flash_fwd_kernel.h): TileScheduler common::PersistentFwdTileScheduler, Mainloop
// MainloopFwd (TMA + wgmma, mainloop_fwd.h), Variant common::ScoreVariant, softmax
// common::OnlineSoftmax, Epilogue EpilogueFwd (epilogue_fwd.h). Dropout is not on this path
// (api_sm90.cpp routes it to cuda_sm80).
//
// A CTA runs one tile (a query block of one head) or, persistent, several in turn (the scheduler's
// waves; fwd_launch.h chooses). Warp roles, for each of the CTA's tiles:
//   warpgroup 0, warp 0, one thread   producer: TMA of K(first), Q (once barrier_q_empty says the
//                                     consumers are done with the previous one), V(first), then
//                                     K(n), V(n) into 2-stage pipelines; up to head dim 128 it
//                                     also picks the tiles (static waves or the dynamic counter)
//                                     and hands each to the consumers with its Q (kHandOver)
//   warpgroups 1.. (64 rows each)     consumers: S = Q·Kᵀ, variant, softmax, O += P·V, epilogue
// The stages of FlashAttention-3's ablation are template flags, so each can be measured alone
// (docs/perf.md, "Hopper forward stages"):
//   kRegRealloc  setmaxnreg: the producer drops to 24 registers, the consumers rise to 240
//   kPingPong    named barriers make the consumer warpgroups take turns issuing their products,
//                so one warpgroup's softmax runs while the other's products use the tensor cores
//   kOverlap     inside a warpgroup, Q·K(n) and P(n+1)·V(n+1) are in flight together and the
//                softmax of block n runs between their waits (O is rescaled after P·V retired)
// Per key block n (last to first), kOverlap (FlashAttention-3's order; hdim 256 rescales after
// wait<0> instead, kRescaleUnderQK):
//   issue S = Q·K(n)                              one wgmma batch
//   O *= α(n+1) (OnlineSoftmax::rescale), while Q·K(n) runs; wait for V(n+1)
//   issue O += P·V(n+1)                           a second batch, committed after the first
//   wait<1> (S done) -> release K(n)
//   S = variant(S); m, l, P, α(n) = softmax stats OnlineSoftmax::update_stats
//   wait<0> (P·V done) -> release V(n+1)
//   P = bf16(S)
// (Until session 27 O was rescaled after wait<0>, when this warpgroup's products had retired:
// the FMULs then sat between two issues instead of under a running product; 1-2 % slower, H200,
// docs/perf.md "session 27".)
#pragma once

#include <cute/tensor.hpp>

#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/cutlass.h>

#include "cuda/common/block_range.h"
#include "cuda/common/kernel_args.h"
#include "cuda/common/softmax.h"
#include "cuda/common/tile_scheduler.h"
#include "cuda/sm90/tile_size.h"  // kMaxConsumerZeroingHeadDim
#include "cuda/sm90/varlen.h"     // zero_rows_from
#include "cuda/sm90/fragments.h"
#include "cuda/sm90/pipeline.h"

namespace flashlab {
namespace sm90 {

using namespace cute;

// Which of FlashAttention-3's techniques a kernel uses (the production kernels use all).
template <bool kRegRealloc_, bool kPingPong_, bool kOverlap_>
struct Stages {
  static constexpr bool kRegRealloc = kRegRealloc_;
  static constexpr bool kPingPong = kPingPong_;
  static constexpr bool kOverlap = kOverlap_;
};
using AllStages = Stages<true, true, true>;

template <typename Mainloop_, typename Epilogue_, typename TileScheduler_, typename Variant_, typename Stages_>
struct FlashFwdKernel {
  using Mainloop = Mainloop_;
  using Epilogue = Epilogue_;
  using TileScheduler = TileScheduler_;
  using Variant = Variant_;
  using Traits = typename Mainloop::Traits;
  using Element = typename Traits::Element;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr int kThreads = Traits::kThreads;
  static constexpr int kMmaThreads = Traits::kMmaThreads;
  static constexpr int kMmaWarpGroups = Traits::kMmaWarpGroups;
  // Varlen calls run on tiles of two consumer warpgroups only (fwd_launch.h picks them): with three,
  // on 160 registers, the zeroing of V's neighbour rows (Mainloop::zero_v_rows) made ptxas spill.
  // Who zeroes: the consumers up to head dim 192; above (256, where the consumers' zeroing spilled
  // wherever it was placed) warps 1-3 of the producer warpgroup (zero_v_helper), while the
  // consumers wait at the tile's start. No sink tokens there (api_sm90.cpp: the forward's sink
  // tokens stop at head dim 192).
  static constexpr bool kVarlenCapable = kMmaWarpGroups == 2;
  static constexpr bool kZeroByHelper = kVarlenCapable && Traits::kHeadDim > kMaxConsumerZeroingHeadDim;
  static constexpr bool kZeroByConsumers = kVarlenCapable && !kZeroByHelper;
  static constexpr bool kRegRealloc = Stages_::kRegRealloc;
  static constexpr bool kPingPong = Stages_::kPingPong;
  static constexpr bool kOverlap = Stages_::kOverlap;
  // StreamingLLM sink tokens (Variant::kSinks: the kernel fwd_launch.h launches when they matter):
  // the key blocks of common::SinkKeyBlockWalk. The kernel without them is unchanged.
  static constexpr bool kSinks = Variant::kSinks;
  using SinkWalk = common::SinkKeyBlockWalk<kBlockM, kBlockN>;
  // Registers after setmaxnreg: the traits' split (24 / 240 with two consumer warpgroups), except
  // in the sink-token kernel at head dim 192, where the producer's walk bounds beside the TMA
  // coordinates of 3 boxes a load spilled 8 bytes on 24: 40 / 232 there (its narrower key block,
  // tile_size.h fwd_sinks_tile_size, leaves the consumers room).
  static constexpr bool kWideProducer = kSinks && Traits::kHeadDim > 128;
  static constexpr int kProducerRegs = kWideProducer ? 40 : Traits::kProducerRegs;
  static constexpr int kConsumerRegs = kWideProducer ? 232 : Traits::kConsumerRegs;
  static_assert(kProducerRegs + kMmaWarpGroups * kConsumerRegs <= Traits::kEntryRegs * (1 + kMmaWarpGroups),
                "setmaxnreg would ask for more registers than the launch allocated (a hang)");
  // Where ptxas wants the consumer's code inlined whole (nvcc 13.0, checked by the ptxas gate): at
  // 128 x 176 a call to consume() puts a function boundary inside the wgmma pipeline (C7510) and
  // spills; inlining it at 128 x 80 (hdim 256) makes ptxas inject warpgroup.arrive (C7519). So the
  // tiles wider than 128 keys (hdim 128's 128 x 176, hdim 96's 128 x 192) inline it; the others
  // compile to the same SASS as before (operator() is inlined into the kernel always).
  static constexpr bool kInlineConsumer = kBlockN > 128;
  // kOverlap: O *= α and the V wait between the Q·K and P·V issues (FlashAttention-3's order, 1-2 %
  // faster at hdim 64 and 128, docs/perf.md session 27), or after wait<0> (the order before). At
  // hdim 256 (128 x 80, O = 128 registers a thread, consume() a call) ptxas injects
  // warpgroup.arrive (C7519) for the rescale inside the issue window, so that bucket keeps the
  // order before.
  static constexpr bool kRescaleUnderQK = kHeadDim <= 192;
  using PipelineK = typename Mainloop::PipelineK;
  using PipelineV = typename Mainloop::PipelineV;
  using PipelineState = typename Mainloop::PipelineState;

  struct Params {
    typename TileScheduler::Params scheduler;
    typename Mainloop::Params mainloop;
    typename Variant::Params variant;
    typename Epilogue::Params epilogue;
  };
  static Params to_params(const common::FwdArguments& a) {
    return Params{TileScheduler::to_params(a.seq, kBlockM), Mainloop::to_params({a.in, a.seq}),
                  Variant::to_params(a.score), Epilogue::to_params(a.out)};
  }
  using SharedStorage = typename Mainloop::SharedStorage;
  static constexpr int kSharedStorageBytes = int(sizeof(SharedStorage));

  // max_ctas: the grid's CTAs at most (the SM count: persistent CTAs; >= the tiles: one tile each).
  static dim3 grid(const Params& params, int max_ctas) { return TileScheduler::grid(params.scheduler, max_ctas); }

  __device__ __forceinline__ void operator()(const Params& params, SharedStorage& smem) const {
    const int warp_idx = cutlass::canonical_warp_idx_sync();
    const int warp_group = cutlass::canonical_warp_group_idx();
    if (warp_idx == 0 && cute::elect_one_sync()) {
      Mainloop::prefetch_descriptors(params.mainloop);
      smem.barrier_q.init(/*arrive_count=*/1);
      smem.barrier_q_empty.init(/*arrive_count=*/kMmaThreads);
    }
    typename PipelineK::Params pipe;
    pipe.role = warp_group == 0 ? PipelineK::ThreadCategory::Producer : PipelineK::ThreadCategory::Consumer;
    pipe.is_leader = threadIdx.x % cutlass::NumThreadsPerWarpGroup == 0;
    pipe.num_consumers = kMmaThreads;
    pipe.transaction_bytes = Traits::kTmaBytesKV;
    PipelineK pipeline_k(smem.pipeline_k, pipe);
    PipelineV pipeline_v(smem.pipeline_v, pipe);
    __syncthreads();  // barrier initializations visible to every warp

    if (warp_group == 0) {
      if constexpr (kRegRealloc) cutlass::arch::warpgroup_reg_dealloc<kProducerRegs>();
      if (warp_idx == 0 && cute::elect_one_sync()) produce(params, smem, pipeline_k, pipeline_v);
      if constexpr (kZeroByHelper) {
        if (warp_idx != 0 && params.mainloop.varlen) zero_v_helper(params, smem, pipeline_v);
      }
    } else {
      if constexpr (kRegRealloc) cutlass::arch::warpgroup_reg_alloc<kConsumerRegs>();
      const int wg = (static_cast<int>(threadIdx.x) - cutlass::NumThreadsPerWarpGroup) / cutlass::NumThreadsPerWarpGroup;
      PipelineState state_k, state_v;  // consumer states start at stage 0, phase 0
      // Ping-pong runs over all of the CTA's tiles as one sequence of products (every warpgroup
      // issues as many): the last warpgroup lets the first one start, and the first takes the last
      // arrival at the end, so that no barrier is left half-arrived at exit.
      constexpr int kPairThreads = 2 * cutlass::NumThreadsPerWarpGroup;
      if constexpr (kPingPong) {
        if (wg == kMmaWarpGroups - 1) named_barrier_arrive(kPairThreads, FwdBarrier::kWarpSchedulerWG1);
      }
      if constexpr (kHandOver) {
        // The tiles come from the producer, each with its Q (hand_over): barrier_q's phase counts
        // them, and a slot without a tile ends the loop.
        for (int q_loads = 0;; ++q_loads) {
          smem.barrier_q.wait(q_loads % 2);
          common::WorkTile tile;
          if (!handed_tile(params, smem, q_loads % 2, tile)) break;
          if constexpr (kZeroByHelper) zero_v_sync(params, tile);
          if constexpr (kInlineConsumer)
            consume_tile(params, smem, tile, pipeline_k, pipeline_v, state_k, state_v, q_loads % 2);
          else
            consume(params, smem, tile, pipeline_k, pipeline_v, state_k, state_v, q_loads % 2);
        }
      } else {
        // The static waves' tiles, computed here as the producer does.
        int q_loads = 0;  // Q tiles this CTA loaded so far: barrier_q's phase
        for (int k = 0;; ++k) {
          const int t = TileScheduler::tile_index(params.scheduler, k);
          if (t < 0) break;
          const common::WorkTile tile = TileScheduler::tile(params.scheduler, t);
          if (tile.m_block * kBlockM >= tile.q_len) continue;  // varlen: past this sequence's end (CTA-uniform)
          if constexpr (kZeroByHelper) zero_v_sync(params, tile);
          if constexpr (kInlineConsumer)
            consume_tile(params, smem, tile, pipeline_k, pipeline_v, state_k, state_v, q_loads % 2);
          else
            consume(params, smem, tile, pipeline_k, pipeline_v, state_k, state_v, q_loads % 2);
          ++q_loads;
        }
      }
      if constexpr (kPingPong) {
        if (wg == 0) named_barrier_sync(kPairThreads, FwdBarrier::kWarpSchedulerWG1);
      }
    }
  }

  // The producer: one elected thread of warp 0, every tile of the CTA. Per tile: the tile for the
  // consumers (hand_over), K of the first key block (its stage frees while the consumers still
  // work on the previous tile), then Q once every consumer thread released the previous one
  // (barrier_q_empty; Q's arrival also publishes the tile), V of the first block, then the rest
  // of the key blocks. Q is loaded for every tile, even one whose rows see no key, so that the
  // consumers' handshake is the same for every tile. The next tile: the static waves' next
  // (TileScheduler::tile_index), or, with the dynamic scheduler, the counter's, fetched right after
  // Q's load is issued so that the atomic's round trip passes under this tile's loads. After the
  // last tile, a slot without a tile and an arrive on barrier_q without bytes end the consumers'
  // loop.
  // kHandOver: the consumers take each tile from the producer (hand_over), which then may take
  // tiles from the dynamic scheduler's counter when the launch gives it one (fwd_launch.h). Else
  // the consumers compute the static waves' tiles as the producer does (the kernel as before the
  // dynamic scheduler). Up to head dim 128, without sink tokens. Not in the sink-token kernels (a
  // left window: fwd_launch.h never counts for them; with the hand-over those at head dims 32-128
  // spilled 4 bytes), nor at head dim 256 (16 bytes spilled on 240 registers: values derived from
  // the thread index, hoisted out of the tile loop and kept across it; nvcc 13.0), nor at 192,
  // where it compiled clean but ran 1.4-2.6 % slower with static waves and the counter lost to
  // them at 1k and 4k (H200, session 41: docs/perf.md). They keep static scheduling.
  static constexpr bool kHandOver = !kSinks && kHeadDim <= kDynamicMaxHeadDim;
  static constexpr bool kDynamicCapable = kHandOver;
  __device__ void produce(const Params& params, SharedStorage& smem, PipelineK& pipeline_k,
                          PipelineV& pipeline_v) const {
    PipelineState state_k = cutlass::make_producer_start_state<PipelineK>();
    PipelineState state_v = cutlass::make_producer_start_state<PipelineV>();
    int q_loads = 0;
    if constexpr (kHandOver) {
      const bool dynamic = params.scheduler.counter != nullptr;
      int k = 0;  // static waves: the wave
      int t = TileScheduler::tile_index(params.scheduler, 0);
      CUTE_NO_UNROLL
      while (t >= 0) {
        int fetched = 0;
        produce_tile(params, smem, TileScheduler::template tile<true>(params.scheduler, t), pipeline_k, pipeline_v,
                     state_k, state_v, q_loads, dynamic, fetched);
        t = dynamic ? TileScheduler::none_if_past(params.scheduler, fetched)
                    : TileScheduler::tile_index(params.scheduler, ++k);
      }
      hand_over(smem, q_loads % 2, -1, 0, 0);
      if (q_loads > 0) smem.barrier_q_empty.wait((q_loads - 1) % 2);
      smem.barrier_q.arrive();
    } else {
      CUTE_NO_UNROLL
      for (int k = 0;; ++k) {
        const int t = TileScheduler::tile_index(params.scheduler, k);
        if (t < 0) break;
        int fetched;
        produce_tile(params, smem, TileScheduler::tile(params.scheduler, t), pipeline_k, pipeline_v, state_k,
                     state_v, q_loads, false, fetched);
      }
    }
    // Do not retire while a consumer may still arrive on these barriers.
    pipeline_k.producer_tail(state_k);
    pipeline_v.producer_tail(state_v);
  }

  __device__ __forceinline__ void produce_tile(const Params& params, SharedStorage& smem,
                                               const common::WorkTile& tile, PipelineK& pipeline_k,
                                               PipelineV& pipeline_v, PipelineState& state_k,
                                               PipelineState& state_v, int& q_loads, bool dynamic,
                                               int& fetched) const {
    if (tile.m_block * kBlockM >= tile.q_len) return;  // varlen: past this sequence's end (no hand-over)
    if constexpr (kHandOver) hand_over(smem, q_loads % 2, tile.m_block, tile.head, tile.batch);
    const common::KeyBlockRange<kBlockM, kBlockN> range(params.variant, tile);
    const typename Mainloop::TileCoords c = Mainloop::coords(params.mainloop, tile);
    if constexpr (kSinks) {  // the same sequence over SinkKeyBlockWalk's blocks
      const SinkWalk walk(params.variant, tile, range);
      if (!walk.empty()) Mainloop::template load_kv<false>(params.mainloop, c, walk.first, pipeline_k, state_k, smem);
      if (q_loads > 0) smem.barrier_q_empty.wait((q_loads - 1) % 2);
      Mainloop::load_q(params.mainloop, c, smem);
      ++q_loads;
      if (walk.empty()) return;
      Mainloop::template load_kv<true>(params.mainloop, c, walk.first, pipeline_v, state_v, smem);
      // The rest of the window, then the sink blocks: two plain loops (one loop stepping with
      // walk.next() kept sink_end and lo live on the producer's 24 registers: 20 bytes spilled).
      int n = walk.first - 1;
      const int sink_end = walk.sink_end;
      CUTE_NO_UNROLL
      for (; n >= walk.lo; --n) {
        Mainloop::template load_kv<false>(params.mainloop, c, n, pipeline_k, state_k, smem);
        Mainloop::template load_kv<true>(params.mainloop, c, n, pipeline_v, state_v, smem);
      }
      if (n >= sink_end) n = sink_end - 1;
      CUTE_NO_UNROLL
      for (; n >= 0; --n) {
        Mainloop::template load_kv<false>(params.mainloop, c, n, pipeline_k, state_k, smem);
        Mainloop::template load_kv<true>(params.mainloop, c, n, pipeline_v, state_v, smem);
      }
      return;
    }
    if (!range.empty())
      Mainloop::template load_kv<false>(params.mainloop, c, range.n_max - 1, pipeline_k, state_k, smem);
    if (q_loads > 0) smem.barrier_q_empty.wait((q_loads - 1) % 2);
    Mainloop::load_q(params.mainloop, c, smem);
    ++q_loads;
    if (dynamic) fetched = TileScheduler::fetch_next(params.scheduler);
    if (range.empty()) return;
    Mainloop::template load_kv<true>(params.mainloop, c, range.n_max - 1, pipeline_v, state_v, smem);
    // Not unrolled: the producer lives on 24 registers (setmaxnreg), and the unrolled loop's
    // TMA coordinates spilled (nvcc 13.0, -DNDEBUG, head dims 192 and 256: 12-20 bytes).
    CUTE_NO_UNROLL
    for (int n = range.n_max - 2; n >= range.n_min; --n) {
      Mainloop::template load_kv<false>(params.mainloop, c, n, pipeline_k, state_k, smem);
      Mainloop::template load_kv<true>(params.mainloop, c, n, pipeline_v, state_v, smem);
    }
  }

  // The tile handed to the consumers with its Q, in barrier_q's phase's slot of smem.tile. The
  // producer writes a tile's slot first thing (the slot's previous tile, two back, was released on
  // barrier_q_empty, which the producer waited for before the previous tile's Q; the consumers
  // read a slot before they release its Q); load_q's arrive on barrier_q then publishes it (an
  // mbarrier arrive releases the CTA's earlier writes, the consumers' wait acquires them). Inline
  // PTX with a memory clobber, so that neither access moves across the barrier operations
  // (themselves asm volatile, without one). The consumers get the tile decoded: the grouped
  // order's divisions stay in the producer (in the consumers, hdim 64's 192 x 128 spilled 12 bytes).
  __device__ static void hand_over(SharedStorage& smem, int slot, int m_block, int head, int batch) {
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(cute::cast_smem_ptr_to_uint(smem.tile[slot])),
                 "r"(m_block), "r"(head), "r"(batch), "r"(0)
                 : "memory");
  }
  // False: the CTA has no more tiles.
  __device__ static bool handed_tile(const Params& params, SharedStorage& smem, int slot, common::WorkTile& tile) {
    int m_block, head, batch, unused;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(m_block), "=r"(head), "=r"(batch), "=r"(unused)
                 : "r"(cute::cast_smem_ptr_to_uint(smem.tile[slot]))
                 : "memory");
    tile.m_block = m_block;
    tile.head = head;
    tile.set_sequence(params.scheduler.seq, batch);
    return m_block >= 0;
  }

  // Varlen at head dims above kMaxConsumerZeroingHeadDim: warps 1-3 of the producer warpgroup follow
  // the CTA's tiles as the producer does and, for each tile whose first V block (the last key
  // block) reaches past its sequence, zero that block's rows of the next sequence (zero_rows_from,
  // varlen.h) once its TMA landed, fence them for wgmma's async proxy and arrive on kVZeroed; the
  // consumers wait there at the tile's start (operator()), before consume(), so its code is the
  // kernel's without varlen. They first arrive on kVReady: the helper waits on the stage's full
  // barrier only once the consumers reached the tile, so that barrier is never more than one
  // phase ahead of it (a parity wait cannot tell two phases apart: flash_bwd_kernel.h's
  // zero_boundary_qdo learned it). The helper's V pipeline state advances by each tile's V blocks.
  static constexpr int kZeroHelperThreads = 3 * cutlass::NumThreadsPerWarp;
  static constexpr int kZeroSyncThreads = kMmaThreads + kZeroHelperThreads;
  __device__ static bool first_v_block_passes_end(const Params& params, const common::WorkTile& tile) {
    const common::KeyBlockRange<kBlockM, kBlockN> range(params.variant, tile);
    return !range.empty() && range.n_max * kBlockN > tile.k_len;
  }
  __device__ void zero_v_helper(const Params& params, SharedStorage& smem, PipelineV& pipeline_v) const {
    static_assert(!kSinks, "no sink-token kernel above kMaxConsumerZeroingHeadDim (kMaxSinkTokensHeadDim)");
    const int tid = static_cast<int>(threadIdx.x) - cutlass::NumThreadsPerWarp;  // 0..95
    PipelineState state_v;  // the consumers' view: stage 0, phase 0
    CUTE_NO_UNROLL
    for (int k = 0;; ++k) {
      const int t = TileScheduler::tile_index(params.scheduler, k);
      if (t < 0) break;
      const common::WorkTile tile = TileScheduler::tile(params.scheduler, t);
      if (tile.m_block * kBlockM >= tile.q_len) continue;
      const common::KeyBlockRange<kBlockM, kBlockN> range(params.variant, tile);
      if (range.empty()) continue;
      if (range.n_max * kBlockN > tile.k_len) {
        named_barrier_sync(kZeroSyncThreads, FwdBarrier::kVReady);
        pipeline_v.consumer_wait(state_v);
        Mainloop::template zero_v_rows<kZeroHelperThreads>(smem, state_v.index(),
                                                           tile.k_len - (range.n_max - 1) * kBlockN, tid);
        named_barrier_arrive(kZeroSyncThreads, FwdBarrier::kVZeroed);
      }
      state_v.advance(range.n_max - range.n_min);
    }
  }

  // The consumers' side of zero_v_helper at a tile's start (varlen, kZeroByHelper).
  __device__ __forceinline__ static void zero_v_sync(const Params& params, const common::WorkTile& tile) {
    if (params.mainloop.varlen && first_v_block_passes_end(params, tile)) {
      named_barrier_arrive(kZeroSyncThreads, FwdBarrier::kVReady);
      named_barrier_sync(kZeroSyncThreads, FwdBarrier::kVZeroed);
    }
  }
  __device__ static int opaque_tid_x() {
    int t;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
    return t;
  }

  // Every consumer thread's arrival on barrier_q_empty: its reads of Q's tile are over (its Q·Kᵀ
  // products retired; where O is staged in Q's tile, its epilogue read O back). The fence orders
  // those generic-proxy accesses before the next Q's TMA (async-proxy) writes.
  __device__ static void release_q(SharedStorage& smem) {
    cutlass::arch::fence_view_async_shared();
    smem.barrier_q_empty.arrive();
  }

  // One tile, one consumer thread: consume_tile() as a call where ptxas chooses to keep it one.
  __device__ void consume(const Params& params, SharedStorage& smem, const common::WorkTile& tile,
                          PipelineK& pipeline_k, PipelineV& pipeline_v, PipelineState& state_k,
                          PipelineState& state_v, int q_phase) const {
    consume_tile(params, smem, tile, pipeline_k, pipeline_v, state_k, state_v, q_phase);
  }

  // One tile, one consumer thread: the mainloop, then the epilogue. Its Q: barrier_q's phase
  // q_phase (kHandOver: operator() waited for it).
  __device__ __forceinline__ void consume_tile(const Params& params, SharedStorage& smem,
                                               const common::WorkTile& tile, PipelineK& pipeline_k,
                                               PipelineV& pipeline_v, PipelineState& state_k,
                                               PipelineState& state_v, int q_phase) const {
    const common::KeyBlockRange<kBlockM, kBlockN> range(params.variant, tile);
    // kSinks: the blocks of SinkKeyBlockWalk, first = the first one visited (else n_max - 1).
    // Without sink tokens walk is never built (sink_end, lo, first folded away).
    // (The expressions without sink tokens are the ones of the kernel before sink tokens: written
    // otherwise, ptxas scheduled the prologue differently.)
    const SinkWalk walk = kSinks ? SinkWalk(params.variant, tile, range) : SinkWalk{};
    auto next_block = [&](int n) __attribute__((always_inline)) { return kSinks ? walk.next(n) : n - 1; };
    // int, not unsigned: the coordinates below feed signed mask arithmetic (variant.h).
    // kHandOver: the thread index read anew for each tile, so that what derives from it is not
    // hoisted out of the tile loop (it was, and hdim 64's 192 x 128 spilled 12 bytes: nvcc 13.0).
    const int mma_tid = (kHandOver ? opaque_tid_x() : static_cast<int>(threadIdx.x)) - cutlass::NumThreadsPerWarpGroup;
    const int wg = mma_tid / cutlass::NumThreadsPerWarpGroup;  // consumer warpgroup 0..kMmaWarpGroups-1
    // Varlen: the first V block (the last key block) reaching into the next sequence has those
    // rows zeroed before any P·V reads it (Mainloop::zero_v_rows); here, first, where the least is
    // live (later, ptxas spilled around it). Uniform over the CTA; the loop's wait on this stage
    // returns at once.
    if constexpr (kZeroByConsumers) {
      if (params.mainloop.varlen && (kSinks ? !walk.empty() && (walk.first + 1) * kBlockN > tile.k_len
                                            : !range.empty() && range.n_max * kBlockN > tile.k_len)) {
        pipeline_v.consumer_wait(state_v);
        Mainloop::template zero_v_rows<kMmaThreads>(
            smem, state_v.index(), tile.k_len - (kSinks ? walk.first : range.n_max - 1) * kBlockN, mma_tid);
        named_barrier_sync(kMmaThreads, FwdBarrier::kVZeroed);
      }
    }
    typename Traits::TiledMmaQK mma_qk;
    typename Traits::TiledMmaPV mma_pv;
    Tensor acc_o = partition_fragment_C(mma_pv, Shape<Int<kBlockM>, Int<kHeadDim>>{});  // ((2, 2, HDIM/8), 1, 1)
    clear(acc_o);
    Tensor o = rowcol_view(acc_o);                                          // (2 rows, HDIM/4 cols)
    Tensor cS = make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{});  // (BLK_M, BLK_N) -> (row, col)
    Tensor tScS = rowcol_view(mma_qk.get_thread_slice(mma_tid).partition_C(cS));  // (rows, cols) -> (row, col)

    const Variant variant(params.variant, tile);
    common::OnlineSoftmax<Traits::kRowsPerThread> softmax;

    if (kSinks ? !walk.empty() : !range.empty()) {
      Mainloop mainloop(smem, mma_tid);
      const float scale_log2 = variant.softmax_scale_log2();
      Tensor acc_s = partition_fragment_C(mma_qk, Shape<Int<kBlockM>, Int<kBlockN>>{});  // ((2, 2, BLK_N/8), 1, 1)
      Tensor s = rowcol_view(acc_s);                                                     // (2 rows, BLK_N/4 cols)
      Tensor p16 = make_tensor<Element>(acc_s.layout());                   // P in 16 bits, S's register order
      Tensor tOrP = make_tensor(p16.data(), acc_as_a_operand(acc_s.layout()));  // ((2, 2, 2), 1, BLK_N/16)
      float alpha[Traits::kRowsPerThread];

      // Ping-pong: warpgroup w issues its products after w - 1 issued theirs (round robin, across
      // the CTA's tiles: operator() starts and ends the rotation).
      const FwdBarrier own = offset(FwdBarrier::kWarpSchedulerWG1, wg);
      const FwdBarrier next = offset(FwdBarrier::kWarpSchedulerWG1, (wg + 1) % kMmaWarpGroups);
      constexpr int kPairThreads = 2 * cutlass::NumThreadsPerWarpGroup;
      auto issue = [&](auto&& products) __attribute__((always_inline)) {
        if constexpr (kPingPong) named_barrier_sync(kPairThreads, own);
        products();
        if constexpr (kPingPong) named_barrier_arrive(kPairThreads, next);
      };
      // kSinks: every masked block takes the sink keys (a window block's sink bound is <= its
      // first key, so it masks as without them); the sink blocks are always masked.
      auto before_softmax = [&](int n_block) __attribute__((always_inline)) {
        if ((kSinks && n_block < walk.sink_end) || range.needs_mask(n_block))
          variant.template before_softmax<true, kSinks>(s, tScS, n_block);
        else
          variant.template before_softmax<false>(s, tScS, n_block);
      };

      // kOverlap: one key block; O += P·V of the previous block runs during this block's softmax.
      auto step_overlap = [&](int n_block, auto mask_flag) __attribute__((always_inline)) {
        constexpr bool kMask = decltype(mask_flag)::value;
        pipeline_k.consumer_wait(state_k);
        if constexpr (!kRescaleUnderQK) pipeline_v.consumer_wait(state_v);
        issue([&] {
          mainloop.issue_qk(state_k.index(), acc_s);
          // O *= α(n + 1) while Q·K(n) runs (it touches S only), before P(n + 1)·V(n + 1) adds to
          // O; the V wait here too, so Q·K(n) never waits for V(n + 1). After the first block, α
          // is 0 and O still 0.
          if constexpr (kRescaleUnderQK) {
            softmax.rescale(o, alpha);
            pipeline_v.consumer_wait(state_v);
          }
          mainloop.issue_pv(state_v.index(), tOrP, acc_o);
        });
        warpgroup_wait<1>();  // S = Q·K(n) done; P·V(n + 1) may still run
        pipeline_k.consumer_release(state_k);
        ++state_k;
        variant.template before_softmax<kMask, kSinks && kMask>(s, tScS, n_block);
        softmax.update_stats(s, scale_log2, alpha);
        warpgroup_wait<0>();  // P·V(n + 1) done: O and P's registers are free again
        pipeline_v.consumer_release(state_v);
        ++state_v;
        if constexpr (!kRescaleUnderQK) softmax.rescale(o, alpha);
        convert_into(acc_s, p16);
      };
      // !kOverlap: each product waited for at once (FlashAttention-3's stages 1-3).
      auto step_serial = [&](int n_block, auto mask_flag) __attribute__((always_inline)) {
        constexpr bool kMask = decltype(mask_flag)::value;
        pipeline_k.consumer_wait(state_k);
        issue([&] { mainloop.issue_qk(state_k.index(), acc_s); });
        warpgroup_wait<0>();
        pipeline_k.consumer_release(state_k);
        ++state_k;
        variant.template before_softmax<kMask, kSinks && kMask>(s, tScS, n_block);
        softmax.update(s, o, scale_log2);
        convert_into(acc_s, p16);
        pipeline_v.consumer_wait(state_v);
        issue([&] { mainloop.issue_pv(state_v.index(), tOrP, acc_o); });
        warpgroup_wait<0>();
        pipeline_v.consumer_release(state_v);
        ++state_v;
      };
      auto step = [&](int n_block, auto mask_flag) __attribute__((always_inline)) {
        if constexpr (kOverlap)
          step_overlap(n_block, mask_flag);
        else
          step_serial(n_block, mask_flag);
      };

      if constexpr (!kHandOver) smem.barrier_q.wait(q_phase);
      int n_block = kSinks ? walk.first : range.n_max - 1;
      if constexpr (kOverlap) {
        // The first block alone: no P·V to overlap yet, and O is still zero (no rescale).
        pipeline_k.consumer_wait(state_k);
        issue([&] { mainloop.issue_qk(state_k.index(), acc_s); });
        warpgroup_wait<0>();
        pipeline_k.consumer_release(state_k);
        ++state_k;
        before_softmax(n_block);
        softmax.update_stats(s, scale_log2, alpha);
        convert_into(acc_s, p16);
        n_block = next_block(n_block);
      }
      // Last to first in three loops, as sm80: blocks cut by the mask (causal diagonal, sequence
      // end), blocks every row sees whole (no mask code compiled in), the masked rest (a window's
      // left edge).
      // kSinks: the window's blocks [walk.lo, n_max) so, then the sink blocks in the third loop
      // (next_block jumps the gap).
      const int unmasked_begin = range.unmasked_begin(), unmasked_end = range.unmasked_end();
      for (; n_block >= unmasked_end && (!kSinks || n_block >= walk.lo); n_block = next_block(n_block))
        step(n_block, cute::true_type{});
      for (; n_block >= unmasked_begin && (!kSinks || n_block >= walk.lo); n_block = next_block(n_block))
        step(n_block, cute::false_type{});
      for (; n_block >= (kSinks ? 0 : range.n_min); n_block = next_block(n_block)) step(n_block, cute::true_type{});
      // Every Q·Kᵀ of the tile retired: with O staged elsewhere, the next tile's Q may land now,
      // during the last P·V and the epilogue.
      if constexpr (Traits::kSeparateO) release_q(smem);
      if constexpr (kOverlap) {  // the last block's P·V
        pipeline_v.consumer_wait(state_v);
        if constexpr (kRescaleUnderQK) softmax.rescale(o, alpha);
        issue([&] { mainloop.issue_pv(state_v.index(), tOrP, acc_o); });
        warpgroup_wait<0>();
        pipeline_v.consumer_release(state_v);
        ++state_v;
      }
    } else {  // the producer loaded Q anyway (one handshake for every tile)
      if constexpr (!kHandOver) smem.barrier_q.wait(q_phase);
      if constexpr (Traits::kSeparateO) release_q(smem);
    }

    float lse[Traits::kRowsPerThread];
    softmax.finalize(o, variant.lse_scale(), /*out_scale=*/1.0f, lse, variant.sink_logit());
    const Epilogue epilogue(params.epilogue, tile);
    epilogue.store(acc_o, lse, smem.o_staging(), mma_tid);
    if constexpr (!Traits::kSeparateO) release_q(smem);  // O, staged in Q's tile, was read back
  }
};

// The __global__ of the sm90 kernels: the parameters (TMA descriptors included) stay in the
// constant bank (__grid_constant__); the dynamic shared memory is the kernel's SharedStorage.
// The 1 of __launch_bounds__ caps registers at entry, which setmaxnreg needs to take effect.
template <typename Kernel>
__global__ void __launch_bounds__(Kernel::kThreads, 1)
    device_kernel(__grid_constant__ const typename Kernel::Params params) {
  extern __shared__ __align__(1024) char smem[];
  Kernel{}(params, *reinterpret_cast<typename Kernel::SharedStorage*>(smem));
}

}  // namespace sm90
}  // namespace flashlab
