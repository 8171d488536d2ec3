// src/cuda/sm90/pipeline.h — how the producer and consumer warpgroups of the Hopper kernels wait
// for each other: the TMA pipelines (mbarriers) and the named barriers.
//
// Producer -> consumers: TMA completes a transaction count on a stage's "full" mbarrier.
// Consumers -> producer: one arrive per consumer warpgroup on the stage's "empty" mbarrier once its
// wgmma read the stage. Consumer warpgroups among themselves: named barriers (bar.sync / bar.arrive).
#pragma once

#include <cute/tensor.hpp>

#include <cutlass/arch/barrier.h>
#include <cutlass/cutlass.h>
#include <cutlass/pipeline/sm90_pipeline.hpp>

namespace flashlab {
namespace sm90 {

using namespace cute;

// cutlass::PipelineTmaAsync with a cluster of 1 makes every consumer thread arrive on the empty
// barrier (the pinned 4.2 header: is_signaling_thread_ = true when cluster_size == 1, arrival
// count = num_consumers), which FlashAttention-3 measured as a forward regression. Here thread 0 of
// each consumer warpgroup arrives once: its warpgroup_wait returned, so the warpgroup's wgmma have
// read the stage. The base does the rest (waits, producer side); its own barrier init and arrival
// masks are switched off.
// kEveryThread: every consumer thread arrives (count = num_consumers). The backward reads part of
// each stage (LSE, D) with ordinary loads; compute-sanitizer's racecheck sees those reads ordered
// before the producer's next copy into the stage only through the reading thread's own arrive
// (tools/racecheck_mbarrier_probe.cu, modes 0 and 2).
template <int kStages, bool kEveryThread = false>
class PipelineTmaAsyncWarpgroupRelease : public cutlass::PipelineTmaAsync<kStages> {
  using Base = cutlass::PipelineTmaAsync<kStages>;

 public:
  using typename Base::Params;
  using typename Base::PipelineState;
  using typename Base::SharedStorage;

  CUTLASS_DEVICE PipelineTmaAsyncWarpgroupRelease(SharedStorage& storage, Params params)
      : Base(storage, params, Shape<_1, _1, _1>{}, cute::false_type{}, cute::false_type{}),
        empty_(&storage.empty_barrier_[0]) {
    if (cutlass::canonical_warp_idx_sync() == params.initializing_warp && cute::elect_one_sync()) {
      CUTE_UNROLL
      for (int stage = 0; stage < kStages; ++stage) {
        storage.full_barrier_[stage].init(1);  // the producer's arrive_and_expect_tx
        storage.empty_barrier_[stage].init(kEveryThread ? params.num_consumers : params.num_consumers / cutlass::NumThreadsPerWarpGroup);
      }
    }
    cutlass::arch::fence_barrier_init();
  }

  CUTLASS_DEVICE void consumer_release(PipelineState state) {
    // The local arrive: the (cta_id, pred) form the base uses maps the address into the cluster
    // window (mapa + mbarrier.arrive.shared::cluster) even for a cluster of 1.
    if (kEveryThread || threadIdx.x % cutlass::NumThreadsPerWarpGroup == 0) empty_[state.index()].arrive();
  }
  // One more reader's arrival on a stage's empty barrier, by a thread that holds no pipeline object
  // (counted in num_consumers by the kernel): the backward's dQ writer at D 256, whose bulk reduce
  // reads the stage's Q and dO buffers (flash_bwd_kernel.h, write_dq_wide).
  CUTLASS_DEVICE static void extra_release(SharedStorage& storage, int stage) {
    storage.empty_barrier_[stage].arrive();
  }

 private:
  typename Base::EmptyBarrier* empty_;
};

// Named barriers of the forward. The hardware has 16; id 0 is __syncthreads and CUTLASS reserves
// 1-7 for its collectives, so cutlass::arch::NamedBarrier adds 8 to these user ids: 8 are free.
enum class FwdBarrier : uint32_t {
  kWarpSchedulerWG1 = 0,  // ping-pong: consumer warpgroup 1 may issue its GEMMs
  kWarpSchedulerWG2 = 1,  //            ... warpgroup 2
  kWarpSchedulerWG3 = 2,  //            ... warpgroup 3 (kBlockM 192)
  kEpilogueWG1 = 3,       // warpgroup 1 wrote its O rows to shared memory; it may read them back
  kEpilogueWG2 = 4,
  kEpilogueWG3 = 5,
  kVZeroed = 6,           // varlen: V's neighbour rows are zero (the consumers', or the helper's, stores)
  kVReady = 7,            // varlen, head dim 256: the consumers reached the tile the helper zeroes for
};

// Named barriers of the backward (flash_bwd_kernel.h).
enum class BwdBarrier : uint32_t {
  kDsWG1 = 0,    // warpgroup 1's four warps wrote dSᵀ to shared memory: its dQ wgmma may read it;
                 // later in the block: they read the stage's LSE and D (before its release)
  kDsWG2 = 1,
  kDsAll = 2,    // both warpgroups wrote theirs (the split dQ reads all 128 keys' dS)
  kDqFullWG1 = 3,   // dQ slab 0 is in its shared buffer: the writer warp may add it
  kDqFullWG2 = 4,   //   ... slab 1 (split dQ)
  kDqEmptyWG1 = 5,  // the writer's bulk reduce read slab 0's buffer: it may be overwritten
  kDqEmptyWG2 = 6,
  kDqPartial = 7,   // non-split dQ: warpgroup 1's partial sum stored; warpgroup 2 may add its own
};

template <typename Id>
CUTLASS_DEVICE void named_barrier_sync(int threads, Id id) {
  cutlass::arch::NamedBarrier::sync(threads, static_cast<uint32_t>(id));
}
template <typename Id>
CUTLASS_DEVICE void named_barrier_arrive(int threads, Id id) {
  cutlass::arch::NamedBarrier::arrive(threads, static_cast<uint32_t>(id));
}
template <typename Id>
CUTLASS_DEVICE Id offset(Id first, int i) {
  return static_cast<Id>(static_cast<uint32_t>(first) + static_cast<uint32_t>(i));
}

}  // namespace sm90
}  // namespace flashlab
