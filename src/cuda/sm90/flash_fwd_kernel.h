// src/cuda/sm90/flash_fwd_kernel.h — the Hopper forward kernel: warp roles, and the order in which
// the consumer warpgroups issue their products and run the softmax. It computes nothing itself.
//
// Pieces (as sm80/flash_fwd_kernel.h): TileScheduler common::FwdTileScheduler, Mainloop
// MainloopFwd (TMA + wgmma, mainloop_fwd.h), Variant common::ScoreVariant, softmax
// common::OnlineSoftmax, Epilogue EpilogueFwd (epilogue_fwd.h). Dropout is not on this path
// (api_sm90.cpp routes it to cuda_sm80).
//
// Warp roles (one CTA = one query block of one head):
//   warpgroup 0, warp 0, one thread   producer: TMA of Q, then K(n), V(n) into 2-stage pipelines
//   warpgroups 1.. (64 rows each)     consumers: S = Q·Kᵀ, variant, softmax, O += P·V, epilogue
// The stages of FlashAttention-3's ablation are template flags, so each can be measured alone
// (docs/perf.md, "Hopper forward stages"):
//   kRegRealloc  setmaxnreg: the producer drops to 24 registers, the consumers rise to 240
//   kPingPong    named barriers make the consumer warpgroups take turns issuing their products,
//                so one warpgroup's softmax runs while the other's products use the tensor cores
//   kOverlap     inside a warpgroup, Q·K(n) and P(n+1)·V(n+1) are in flight together and the
//                softmax of block n runs between their waits (O is rescaled after P·V retired)
// Per key block n (last to first), kOverlap:
//   issue S = Q·K(n); issue O += P·V(n+1)         one wgmma batch each, committed in this order
//   wait<1> (S done) -> release K(n)
//   S = variant(S); m, l, P, α = softmax stats    OnlineSoftmax::update_stats
//   wait<0> (P·V done) -> release V(n+1)
//   O *= α; P = bf16(S)                           OnlineSoftmax::rescale
#pragma once

#include <cute/tensor.hpp>

#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/cutlass.h>

#include "cuda/common/block_range.h"
#include "cuda/common/kernel_args.h"
#include "cuda/common/softmax.h"
#include "cuda/common/tile_scheduler.h"
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
  static constexpr bool kRegRealloc = Stages_::kRegRealloc;
  static constexpr bool kPingPong = Stages_::kPingPong;
  static constexpr bool kOverlap = Stages_::kOverlap;
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
    return Params{TileScheduler::to_params(a.seq), Mainloop::to_params({a.in, a.seq}), Variant::to_params(a.score),
                  Epilogue::to_params(a.out)};
  }
  using SharedStorage = typename Mainloop::SharedStorage;  // O is staged in Q's tile (epilogue_fwd.h)
  static constexpr int kSharedStorageBytes = int(sizeof(SharedStorage));

  static dim3 grid(const Params& params) { return TileScheduler::grid(params.scheduler, kBlockM); }

  __device__ void operator()(const Params& params, SharedStorage& smem) const {
    const int warp_idx = cutlass::canonical_warp_idx_sync();
    const int warp_group = cutlass::canonical_warp_group_idx();
    if (warp_idx == 0 && cute::elect_one_sync()) {
      Mainloop::prefetch_descriptors(params.mainloop);
      smem.barrier_q.init(/*arrive_count=*/1);
    }
    typename PipelineK::Params pipe;
    pipe.role = warp_group == 0 ? PipelineK::ThreadCategory::Producer : PipelineK::ThreadCategory::Consumer;
    pipe.is_leader = threadIdx.x % cutlass::NumThreadsPerWarpGroup == 0;
    pipe.num_consumers = kMmaThreads;
    pipe.transaction_bytes = Traits::kTmaBytesKV;
    PipelineK pipeline_k(smem.pipeline_k, pipe);
    PipelineV pipeline_v(smem.pipeline_v, pipe);
    __syncthreads();  // barrier initializations visible to every warp

    const common::WorkTile tile = TileScheduler::get_tile(params.scheduler);
    if (tile.m_block * kBlockM >= tile.q_len) return;  // varlen: past this sequence's end (CTA-uniform)
    const common::KeyBlockRange<kBlockM, kBlockN> range(params.variant, tile);

    if (warp_group == 0) {
      if constexpr (kRegRealloc) cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegs>();
      if (warp_idx == 0 && !range.empty() && cute::elect_one_sync())
        Mainloop::load(params.mainloop, tile, range.n_min, range.n_max, pipeline_k, pipeline_v, smem);
    } else {
      if constexpr (kRegRealloc) cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegs>();
      consume(params, smem, tile, range, pipeline_k, pipeline_v);
    }
  }

  __device__ void consume(const Params& params, SharedStorage& smem, const common::WorkTile& tile,
                          const common::KeyBlockRange<kBlockM, kBlockN>& range, PipelineK& pipeline_k,
                          PipelineV& pipeline_v) const {
    // int, not unsigned: the coordinates below feed signed mask arithmetic (variant.h).
    const int mma_tid = static_cast<int>(threadIdx.x) - cutlass::NumThreadsPerWarpGroup;
    const int wg = mma_tid / cutlass::NumThreadsPerWarpGroup;  // consumer warpgroup 0..kMmaWarpGroups-1
    typename Traits::TiledMmaQK mma_qk;
    typename Traits::TiledMmaPV mma_pv;
    Tensor acc_o = partition_fragment_C(mma_pv, Shape<Int<kBlockM>, Int<kHeadDim>>{});  // ((2, 2, HDIM/8), 1, 1)
    clear(acc_o);
    Tensor o = rowcol_view(acc_o);                                          // (2 rows, HDIM/4 cols)
    Tensor cS = make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{});  // (BLK_M, BLK_N) -> (row, col)
    Tensor tScS = rowcol_view(mma_qk.get_thread_slice(mma_tid).partition_C(cS));  // (rows, cols) -> (row, col)

    const Variant variant(params.variant, tile);
    common::OnlineSoftmax<Traits::kRowsPerThread> softmax;

    if (!range.empty()) {
      Mainloop mainloop(smem, mma_tid);
      const float scale_log2 = variant.softmax_scale_log2();
      Tensor acc_s = partition_fragment_C(mma_qk, Shape<Int<kBlockM>, Int<kBlockN>>{});  // ((2, 2, BLK_N/8), 1, 1)
      Tensor s = rowcol_view(acc_s);                                                     // (2 rows, BLK_N/4 cols)
      Tensor p16 = make_tensor<Element>(acc_s.layout());                   // P in 16 bits, S's register order
      Tensor tOrP = make_tensor(p16.data(), acc_as_a_operand(acc_s.layout()));  // ((2, 2, 2), 1, BLK_N/16)
      PipelineState state_k, state_v;  // consumer states start at stage 0, phase 0
      float alpha[Traits::kRowsPerThread];

      // Ping-pong: warpgroup w issues its products after w - 1 issued theirs (round robin; the last
      // warpgroup lets the first one start).
      const FwdBarrier own = offset(FwdBarrier::kWarpSchedulerWG1, wg);
      const FwdBarrier next = offset(FwdBarrier::kWarpSchedulerWG1, (wg + 1) % kMmaWarpGroups);
      constexpr int kPairThreads = 2 * cutlass::NumThreadsPerWarpGroup;
      if constexpr (kPingPong) {
        if (wg == kMmaWarpGroups - 1) named_barrier_arrive(kPairThreads, FwdBarrier::kWarpSchedulerWG1);
      }
      auto issue = [&](auto&& products) __attribute__((always_inline)) {
        if constexpr (kPingPong) named_barrier_sync(kPairThreads, own);
        products();
        if constexpr (kPingPong) named_barrier_arrive(kPairThreads, next);
      };
      auto before_softmax = [&](int n_block) __attribute__((always_inline)) {
        if (range.needs_mask(n_block))
          variant.template before_softmax<true>(s, tScS, n_block);
        else
          variant.template before_softmax<false>(s, tScS, n_block);
      };

      // kOverlap: one key block; O += P·V of the previous block runs during this block's softmax.
      auto step_overlap = [&](int n_block, auto mask_flag) __attribute__((always_inline)) {
        constexpr bool kMask = decltype(mask_flag)::value;
        pipeline_k.consumer_wait(state_k);
        pipeline_v.consumer_wait(state_v);
        issue([&] {
          mainloop.issue_qk(state_k.index(), acc_s);
          mainloop.issue_pv(state_v.index(), tOrP, acc_o);
        });
        warpgroup_wait<1>();  // S = Q·K(n) done; P·V(n + 1) may still run
        pipeline_k.consumer_release(state_k);
        ++state_k;
        variant.template before_softmax<kMask>(s, tScS, n_block);
        softmax.update_stats(s, scale_log2, alpha);
        warpgroup_wait<0>();  // P·V(n + 1) done: O and P's registers are free again
        pipeline_v.consumer_release(state_v);
        ++state_v;
        softmax.rescale(o, alpha);
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
        variant.template before_softmax<kMask>(s, tScS, n_block);
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

      smem.barrier_q.wait(0);
      int n_block = range.n_max - 1;
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
        --n_block;
      }
      // Last to first in three loops, as sm80: blocks cut by the mask (causal diagonal, sequence
      // end), blocks every row sees whole (no mask code compiled in), the masked rest (a window's
      // left edge).
      const int unmasked_begin = range.unmasked_begin(), unmasked_end = range.unmasked_end();
      for (; n_block >= unmasked_end; --n_block) step(n_block, cute::true_type{});
      for (; n_block >= unmasked_begin; --n_block) step(n_block, cute::false_type{});
      for (; n_block >= range.n_min; --n_block) step(n_block, cute::true_type{});
      if constexpr (kOverlap) {  // the last block's P·V
        pipeline_v.consumer_wait(state_v);
        issue([&] { mainloop.issue_pv(state_v.index(), tOrP, acc_o); });
        warpgroup_wait<0>();
        pipeline_v.consumer_release(state_v);
        ++state_v;
      }
      // Ping-pong leaves one arrival on the first warpgroup's barrier (the last warpgroup's final
      // arrive, or its initial one): take it, so that no barrier is left half-arrived at exit.
      if constexpr (kPingPong) {
        if (wg == 0) named_barrier_sync(kPairThreads, FwdBarrier::kWarpSchedulerWG1);
      }
    }

    float lse[Traits::kRowsPerThread];
    softmax.finalize(o, variant.lse_scale(), /*out_scale=*/1.0f, lse, variant.sink_logit());
    const Epilogue epilogue(params.epilogue, tile);
    epilogue.store(acc_o, lse, smem.q.data(), mma_tid);
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
