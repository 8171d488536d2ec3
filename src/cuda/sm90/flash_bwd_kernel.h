// src/cuda/sm90/flash_bwd_kernel.h — the Hopper backward's main kernel: warp roles and the order of
// the products per query block. It computes nothing itself.
//
// Pieces: TileScheduler common::BwdTileScheduler (one CTA = one key block of 128 keys of one query
// head), Mainloop MainloopBwd (TMA + wgmma, mainloop_bwd.h), Variant common::ScoreVariant (P and dS
// on the transposed tile: p_and_ds_transposed, sm80's math), the stores of epilogue_bwd.h. No
// dropout on this path (api_sm90.cpp routes it to cuda_sm80); varlen in kernels of their own
// (kVarlen).
//
// Warp roles:
//   warpgroup 0, warp 0, one thread   producer: TMA of K, V once, then Q(m), dO(m) and the block's
//                                     LSE·log2 e, D (a row_stats bulk copy), 2 stages
//   warpgroup 0, warp 1               dQ writer: per query block, each dQ slab's shared buffer
//                                     -> dq_accum[m] by one bulk reduce-add (write_dq)
//   warpgroups 1, 2 (64 keys each)    consumers, per query block m of QueryBlockRange:
//     issue Sᵀ = K_w·Qᵀ, dPᵀ = V_w·dOᵀ; wait        (SS, both in flight together)
//     Pᵀ, dSᵀ = variant(Sᵀ, dPᵀ, LSE, D)            ScoreVariant::p_and_ds_transposed
//     dSᵀ (16-bit) -> shared; fence                 the barrier (below) is over the warpgroup's
//                                                   four warps, or both warpgroups when dQ reads
//                                                   all 128 keys' dS
//     issue dV += Pᵀ·dO, dK += dSᵀ·Q                (RS: Pᵀ and dSᵀ from registers); the barrier
//                                                   waits while they run
//     wait
//     issue dQ (SS: bwd_kernel_traits.h, split or per warpgroup); wait dK; release Q(m), dO(m)
//     wait dQ; dQ -> shared (hand_over_dq)          once the writer read the previous block's
//                                                   (named barriers kDqFull / kDqEmpty; non-split:
//                                                   warpgroup 2 adds its sum onto warpgroup 1's);
//                                                   split dQ (D 128): handed to the writer
//                                                   (publish_dq) after the next block's Sᵀ, dPᵀ issue
//   then dK · scale, dV -> global (epilogue_bwd.h).
// With the split dQ a warpgroup reads the other's dS: dS is double-buffered by query block, and
// the barrier of block m + 1 (which both warpgroups reach only after their block-m products
// retired) keeps a buffer from being overwritten while read.
// Stage 4 of docs/design/sm90-backward.md §8 (orientation B); each batch of products is waited
// for before the next.
//
// kDeterministic (a kernel of its own; the default kernel's code is untouched): the same products,
// with the adds to each dq_accum tile in a fixed order (docs/design/sm90-backward.md §5):
//   - the key blocks of a (head, sequence) are handed out last first (get_tile_descending), and
//     the tile of query block m takes the adds of the key blocks that see it, [n_min(m), n_max(m))
//     (common::KeyBlockRange, the transpose of QueryBlockRange), from the highest down: rank
//     r = n_max(m) − 1 − n. With StreamingLLM sink tokens (the general kernels) the sink blocks
//     [0, a(m)) see query blocks past their window too, so r counts the adders of
//     [0, a) ∪ [n_min, n_max) above n (common::dq_add_turn).
//     A CTA therefore waits only for CTAs of higher key blocks of its own
//     (head, sequence), which have *lower* block indices: launched before it, so resident or done
//     (the same in-order-launch assumption FlashAttention-3 makes), and they wait only for lower
//     indices still: no cycle, no deadlock. Descending rather than ascending for the causal mask:
//     key block n first sees query block ≈ 2n (64-row blocks; ≈ n with 128), so the high key blocks
//     (short CTAs) start at late m, where they are the first adders; each CTA then finds its turn
//     already reached and does not wait (FA3: reversed rank and shortest-first). Ascending, every
//     CTA would trail its lower neighbour block by block (half again the critical path).
//   - per query block, the writer warp waits for the CTA's turn on the tile's semaphore, adds
//     each slab, waits for the adds to complete, advances the semaphore (write_dq, epilogue_bwd.h's
//     DqSemaphore). The two warpgroups' partial sums (non-split dQ) are summed in shared memory in
//     a fixed order first. The consumers wait only when the writer still holds their buffer.
//   - GQA dK, dV: kPartial (plain stores into the query head's slice, summed in head order).
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>

#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/cutlass.h>

#include "cuda/common/block_range.h"
#include "cuda/common/kernel_args.h"
#include "cuda/common/math.h"
#include "cuda/common/tile_scheduler.h"
#include "cuda/sm90/epilogue_bwd.h"
#include "cuda/sm90/fragments.h"
#include "cuda/sm90/pipeline.h"
#include "cuda/sm90/varlen.h"  // zero_rows_from

namespace flashlab {
namespace sm90 {

using namespace cute;

// kGeneral: compiled for softcap / ALiBi / StreamingLLM sink tokens (Variant::general(params));
// kDeterministic: the ordered dQ reductions above (BwdArguments::deterministic); kKeyMajor: the
// sink blocks' CTAs first (cta_tile). bwd_launch.h picks.
template <typename Mainloop_, typename Variant_, bool kGeneral, bool kDeterministic = false, bool kVarlen = false,
          bool kKeyMajor = false>
struct FlashBwdKernel {
  using Mainloop = Mainloop_;
  using Variant = Variant_;
  using Traits = typename Mainloop::Traits;
  using Element = typename Traits::Element;
  using TileScheduler = common::BwdTileScheduler;
  using Pipeline = typename Mainloop::Pipeline;
  using PipelineState = typename Mainloop::PipelineState;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr int kThreads = Traits::kThreads;
  // kVarlen: compiled for cu_seqlens (packed tensors), at every head dim. A kernel of its own:
  // the checks it adds in the consumers' loop cost the fixed-length causal backward 4-6 % when
  // tested at run time (H200).

  struct Params {
    typename TileScheduler::Params scheduler;
    typename Mainloop::Params mainloop;
    typename Variant::Params variant;
    common::BwdRowArgs rows;
    common::BwdGradArgs grad;
    int head_dim;
    int kv_group;
  };
  static Params to_params(const common::BwdArguments& a) {
    return Params{TileScheduler::to_params(a.seq),
                  Mainloop::to_params({a.in, a.seq, a.rows}),
                  Variant::to_params(a.score),
                  a.rows,
                  a.grad,
                  a.in.head_dim,
                  a.in.kv_group};
  }
  using SharedStorage = typename Mainloop::SharedStorage;
  static constexpr int kSharedStorageBytes = int(sizeof(SharedStorage));

  static dim3 grid(const Params& params) {
    return kKeyMajor ? TileScheduler::grid_key_major(params.scheduler, kBlockN)
                     : TileScheduler::grid(params.scheduler, kBlockN);
  }

  __device__ void operator()(const Params& params, SharedStorage& smem) const {
    const int warp_idx = cutlass::canonical_warp_idx_sync();
    const int warp_group = cutlass::canonical_warp_group_idx();
    if (warp_idx == 0 && cute::elect_one_sync()) {
      Mainloop::prefetch_descriptors(params.mainloop);
      Mainloop::init_kv_barrier(smem);  // init + the producer's arrival (expect_tx)
    }
    typename Pipeline::Params pipe;
    pipe.role = warp_group == 0 ? Pipeline::ThreadCategory::Producer : Pipeline::ThreadCategory::Consumer;
    pipe.is_leader = threadIdx.x % cutlass::NumThreadsPerWarpGroup == 0;
    // D 256: the dQ writer warp arrives on each stage's empty barrier too, once its bulk reduce
    // read the stage's Q and dO buffers (write_dq_wide).
    pipe.num_consumers = Traits::kMmaThreads + (Traits::kWide ? 1 : 0);
    pipe.transaction_bytes = 2 * Traits::kTmaBytesQ + Mainloop::kStatsBytes;  // Q, dO, LSE and D
    Pipeline pipeline(smem.pipeline_qdo, pipe);
    __syncthreads();  // barrier initializations visible to every warp

    int n_block = 0;
    common::WorkTile tile = cta_tile(params, &n_block);
    if (n_block * kBlockN >= tile.k_len) return;  // past this sequence's keys (CTA-uniform)
    const common::QueryBlockRange<kBlockM, kBlockN> range = cta_range(params, tile, n_block);

    if (warp_group == 0) {
      cutlass::arch::warpgroup_reg_dealloc<Traits::kProducerRegs>();
      if (warp_idx == 0 && !range.empty() && cute::elect_one_sync())
        Mainloop::template load<kVarlen>(params.mainloop, tile, n_block, range.m_min, range.m_max, pipeline, smem);
      else if (warp_idx == 1 && !range.empty())
        write_dq(params, smem);
      else if (kVarlen && warp_idx == 2 && !range.empty() && range.m_max * kBlockM > tile.q_len)
        zero_boundary_qdo(smem, pipeline, range.m_max - 1 - range.m_min, tile.q_len - (range.m_max - 1) * kBlockM);
    } else {
      cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegs>();
      consume(params, smem, tile, n_block, range, pipeline);
    }
  }

  // The CTA's key block and the query blocks that see it. StreamingLLM sink tokens (the general
  // kernels; the deterministic ones rank such a block among a query block's adders by
  // common::dq_add_turn): a key block that may hold sink keys
  // is seen by every later query block (QueryBlockRange's sinks), and its scores take the full mask
  // (the general kernel masks every block; p_and_ds_t's sink keys). kKeyMajor: those longest CTAs
  // are launched first, as in cuda_sm80's backward: the grid is (heads, batch, key blocks)
  // (get_tile_key_major), so key block 0 of every head and sequence starts in the first wave; in
  // the plain order the last heads' sink CTAs start in the grid's last wave and stretch its tail.
  // A kernel of its own (bwd_launch.h key_major_order picks it), its order read from blockIdx:
  // computed (get_tile_low_keys_first's divisions), taken from shared memory, or chosen at run
  // time between two orders, the tile's coordinates are values the kernel must keep in
  // registers, and the head-dim-96 (and with shared memory -128) general kernels spilled 4-16
  // bytes (sessions 35, 37 and 39). Not in the deterministic mode: a sink CTA adds to a query
  // block's dQ after the higher key blocks (dq_add_turn), and launched first such CTAs could fill
  // the GPU waiting for CTAs that cannot start.
  static_assert(!kKeyMajor || (kGeneral && !kDeterministic), "sink blocks first: the general, unordered kernels");
  __device__ static common::WorkTile cta_tile(const Params& params, int* n_block) {
    if constexpr (kDeterministic)
      return TileScheduler::get_tile_descending(params.scheduler, n_block);
    else if constexpr (kKeyMajor)
      return TileScheduler::get_tile_key_major(params.scheduler, n_block);
    else
      return TileScheduler::get_tile(params.scheduler, n_block);
  }
  __device__ static common::QueryBlockRange<kBlockM, kBlockN> cta_range(const Params& params, const common::WorkTile& tile,
                                                                        int n_block) {
    return common::QueryBlockRange<kBlockM, kBlockN>(params.variant, tile, n_block, kGeneral);
  }

  // Varlen: warp 2 of the producer warpgroup clears the next sequence's rows of Q and dO in the
  // stage of the CTA's last query block, when that block reaches past its sequence (the consumers'
  // K / V zeroing is once per CTA, at the start; this one sits inside their loop, where the
  // accumulators are live: done there, ptxas spilled 36 bytes at hdim 64). It waits for the
  // stage's TMA like a consumer, stores zeros (zero_rows_from, varlen.h), fences them for wgmma's
  // async proxy, and arrives on kQdoZeroed, on which the consumers wait before that block's
  // products (kZeroSyncThreads: theirs and this warp's).
  // The eight named barriers are all taken (pipeline.h BwdBarrier); these three borrow ids that
  // the kernel's dQ path leaves unused or uses with the same threads in sequence: split dQ uses
  // kDsAll (every consumer thread, once per block) and not kDqPartial; the other path the reverse;
  // D 256 (kWide) uses kDsAll, kDqFull* and kDqEmpty* only. The arrival of the zeroing warp can
  // come at any time in the consumers' loop, so its barrier must be one the loop never uses; the
  // K / V one comes before the loop, so it may share.
  static constexpr int kZeroSyncThreads = Traits::kMmaThreads + cutlass::NumThreadsPerWarp;
  static constexpr BwdBarrier kQdoZeroed = Traits::kWide      ? BwdBarrier::kDsWG2
                                           : Traits::kDqSplit ? BwdBarrier::kDqPartial
                                                              : BwdBarrier::kDsAll;
  // The consumers reached that block: an id the loop never uses either (split dQ leaves the
  // per-warpgroup dS barriers unused; the other path leaves slab 1's).
  static constexpr BwdBarrier kQdoReady = Traits::kDqSplit ? BwdBarrier::kDsWG1 : BwdBarrier::kDqFullWG2;
  static constexpr BwdBarrier kKvZeroed = Traits::kDqSplit ? BwdBarrier::kDsAll : BwdBarrier::kDqPartial;
  // n: the block's place in the CTA's pipeline; valid: its rows of this sequence (< kBlockM). Both
  // computed before the producer warpgroup gives its registers back (kGeneral's range is costly to
  // recompute on 24 registers: that version spilled 4 bytes).
  __device__ void zero_boundary_qdo(SharedStorage& smem, Pipeline& pipeline, int n, int valid) const {
    if constexpr (kVarlen) {
      // Not the stage's full barrier alone: waited on by parity, it lets a waiter that is two or
      // more phases behind through early (the first version did, and zeroed a stage an earlier
      // block was still using: session 21's sweep failed). The consumers, in step with the
      // pipeline, say when they reached the block; the full barrier's wait then returns at once.
      named_barrier_sync(kZeroSyncThreads, kQdoReady);
      pipeline.consumer_wait(PipelineState(n % Traits::kStages, (n / Traits::kStages) % 2, n));
      const int stage = n % Traits::kStages;
      const int lane = static_cast<int>(threadIdx.x) % cutlass::NumThreadsPerWarp;
      zero_rows_from<kBlockM, kHeadDim, cutlass::NumThreadsPerWarp>(
          make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQ{})(_, _, stage), valid, lane);
      zero_rows_from<kBlockM, kHeadDim, cutlass::NumThreadsPerWarp>(
          make_tensor(make_smem_ptr(smem.dO.data()), typename Traits::SmemLayoutQ{})(_, _, stage), valid, lane);
      cutlass::arch::fence_view_async_shared();
      named_barrier_arrive(kZeroSyncThreads, kQdoZeroed);
    }
  }

  // Varlen, the consumers after consumer_wait of query block m_block: if it is the last block and
  // reaches past its sequence, the zeroing warp (zero_boundary_qdo) clears Q's and dO's rows of the
  // next sequence in its stage before any product reads them.
  __device__ static void wait_boundary_qdo(const common::WorkTile& tile, int m_block, int m_max) {
    if constexpr (kVarlen) {
      if (m_block == m_max - 1 && (m_block + 1) * kBlockM > tile.q_len) {
        named_barrier_arrive(kZeroSyncThreads, kQdoReady);  // the stage landed (consumer_wait)
        named_barrier_sync(kZeroSyncThreads, kQdoZeroed);
      }
    }
  }

  // The dQ hand-over's named barriers: a consumer warpgroup and the writer warp.
  static constexpr int kDqSyncThreads = cutlass::NumThreadsPerWarpGroup + cutlass::NumThreadsPerWarp;
  static constexpr int kDqSlabs = Traits::kDqSlabs;  // split dQ: one slab per warpgroup; else one

  // Warp 1 of the producer warpgroup: per query block, each dQ slab's shared buffer -> the block's
  // dq_accum tile by one bulk reduce-add (lane 0 issues; the TMA unit adds), then the buffers are
  // released once read. With the split dQ warpgroup w fills slab w; otherwise both warpgroups'
  // partial sums are added in shared memory first (warpgroup 0 stores, warpgroup 1 adds its own:
  // consume()), so each query block costs one 64 × D reduction in L2, not two. The consumers no
  // longer spend registers and issue slots on red.global.add. kDeterministic: each slab waits
  // for its turn on the tile's semaphore and completes before the semaphore advances.
  // Recomputes its tile and range from blockIdx rather than taking them: what stays live across
  // the role split must fit the producer warpgroup's registers (the kGeneral kernels spilled 4
  // bytes at 24 registers when the tile and the range were passed). write_dq does that once for
  // both writers (write_dq_slabs, write_dq_wide). The leader is elected before the tile pointer is
  // computed: in the other order the hdim-64 / 128 writers spilled 12-32 bytes at 24 registers.
  // The CTA's first dq_accum tile and the stride between its tiles.
  struct DqTiles {
    float* first;  // the tile of query block range.m_min
    int64_t stride;
  };
  __device__ void write_dq(const Params& params, SharedStorage& smem) const {
    int n_block = 0;
    common::WorkTile tile = cta_tile(params, &n_block);
    const common::QueryBlockRange<kBlockM, kBlockN> range = cta_range(params, tile, n_block);
    const bool leader = cute::elect_one_sync();
    // dq_accum's tiles of one (sequence, head) are evenly spaced in m_block (bwd_workspace.h):
    // a pointer and a stride keep the loop within the producer warpgroup's registers.
    const DqTiles dq{params.grad.dq_accum + common::dq_accum_tile_offset(tile.batch, range.m_min, tile.head,
                                                                         params.scheduler.seqlen_q,
                                                                         params.scheduler.heads_q, kBlockM, Traits::kBucket),
                     int64_t(params.scheduler.heads_q) * kBlockM * Traits::kBucket};
    if constexpr (Traits::kWide)
      write_dq_wide(params, smem, tile, n_block, range.m_min, range.m_max, dq, leader);
    else
      write_dq_slabs(params, smem, tile, n_block, range.m_min, range.m_max, dq, leader);
  }

  // D 256 (no room for a dQ buffer: 225 KiB of shared memory without one). Warpgroup w's slab of
  // query block m goes into its half of the stage's Q and dO buffers (columns [128 w, +128) of
  // each, 16 KiB apiece: after w's dK and dV retired nobody reads them), and this warp adds both
  // to the dq_accum tile by bulk reduce-adds. The stage is refilled only once those read it: the
  // writer is one more arrival on its empty barrier (num_consumers above). Before this, the
  // consumers added dQ by red.global.add.v4 from their registers: 18-25 % of the backward's time
  // at hdim 256 (an H200 build without the adds; docs/perf.md, session 29).
  __device__ float* wide_dq_half(Element* stage_buffers, int stage, int half) const {
    static_assert(kHeadDim == 256 && Mainloop::kDqBufferFloats * sizeof(float) == 2 * kBlockM * 128 * sizeof(Element),
                  "a warpgroup's dQ slab = its halves of one Q and one dO stage");
    // SmemLayoutQ tiles the 128-byte-swizzle atom (8 rows x 64 columns) down the rows first, so
    // columns [128 h, +128) of a stage are one contiguous 16 KiB run.
    static_assert(typename Traits::SmemLayoutQ{}(make_coord(0, 128, 0)) == kBlockM * 128 &&
                      typename Traits::SmemLayoutQ{}(make_coord(0, 0, 1)) == kBlockM * kHeadDim,
                  "stage s, columns [128 h, +128): elements [(2 s + h) · 64 · 128, +64 · 128)");
    return reinterpret_cast<float*>(stage_buffers + (2 * stage + half) * (kBlockM * 128));
  }
  __device__ void write_dq_wide(const Params& params, SharedStorage& smem, common::WorkTile& tile, int n_block,
                                int m_min, int m_max, DqTiles dq, bool leader) const {
    constexpr int kHalfFloats = Mainloop::kDqBufferFloats / 2;
    constexpr uint32_t kHalfBytes = kHalfFloats * sizeof(float);
    float* tile_dq = dq.first;
    static_assert(Traits::kStages == 2, "the stage index below alternates");
    CUTE_NO_UNROLL
    for (int m_block = m_min, stage = 0; m_block < m_max; ++m_block, tile_dq += dq.stride, stage ^= 1) {
      CUTE_UNROLL
      for (int h = 0; h < 2; ++h) {
        named_barrier_sync(kDqSyncThreads, offset(BwdBarrier::kDqFullWG1, h));
        if (m_block + 1 < m_max)  // warpgroup h may signal its next slab (one arrival per phase)
          named_barrier_arrive(kDqSyncThreads, offset(BwdBarrier::kDqEmptyWG1, h));
        if (leader) {
          float* const dst = tile_dq + h * Mainloop::kDqBufferFloats;
          auto issue = [&] {
            bulk_reduce_add_f32(dst, wide_dq_half(smem.q.data(), stage, h), kHalfBytes);
            if (!Traits::kDqTileDropsLastHalfSlab || h == 0)  // bucket 192 (BwdTraitsFor)
              bulk_reduce_add_f32(dst + kHalfFloats, wide_dq_half(smem.dO.data(), stage, h), kHalfBytes);
          };
          if constexpr (kDeterministic)
            add_in_turn(params, tile, n_block, m_block, issue);
          else
            issue();
        }
        __syncwarp();  // converged again before the next bar.sync (an .aligned barrier)
      }
      if (leader) {
        tma_store_arrive();
        tma_store_wait<0>();  // the stage's Q and dO buffers were read
        // The writer's arrival on the stage's empty barrier (counted in num_consumers). The
        // producer warpgroup has 32 registers at D 256 (bwd_kernel_traits.h): at 24 this loop
        // spilled 8 bytes.
        Pipeline::extra_release(smem.pipeline_qdo, stage);
      }
      __syncwarp();
    }
    if (leader) bulk_wait_complete();
  }
  // kDeterministic: the bulk reduce-adds that issue() makes (one slab of the CTA's dQ) in the CTA's
  // turn on the dq_accum tile of query block m_block (DqSemaphore, epilogue_bwd.h), completed before
  // the semaphore advances.
  template <typename Issue>
  __device__ void add_in_turn(const Params& params, common::WorkTile& tile, int n_block, int m_block,
                              Issue issue) const {
    tile.m_block = m_block;
    // kGeneral: sink blocks add outside their window too (cta_range).
    const int rank = common::dq_add_turn<kBlockM, kBlockN>(params.variant, tile, n_block, kGeneral);
    int* sem = params.grad.dq_semaphore + common::dq_semaphore_index(tile.batch, m_block, tile.head,
                                                                     params.scheduler.seqlen_q,
                                                                     params.scheduler.heads_q, kBlockM);
    while (DqSemaphore::load_acquire(sem) < DqSemaphore::turn<kDqSlabs>(rank)) {
    }
    fence_proxy_async_global();  // the earlier turns' adds before this one
    issue();
    tma_store_arrive();
    bulk_wait_complete();
    fence_proxy_async_global();
    DqSemaphore::advance_release(sem);
  }
  __device__ void write_dq_slabs(const Params& params, SharedStorage& smem, common::WorkTile& tile, int n_block,
                                 int m_min, int m_max, DqTiles dq, bool leader) const {
    constexpr int kSlabFloats = Mainloop::kDqBufferFloats;
    constexpr uint32_t kSlabBytes = kSlabFloats * sizeof(float);
    float* tile_dq = dq.first;
    CUTE_NO_UNROLL
    for (int m_block = m_min; m_block < m_max; ++m_block, tile_dq += dq.stride) {
      CUTE_UNROLL
      for (int h = 0; h < kDqSlabs; ++h) {
        named_barrier_sync(kDqSyncThreads, offset(BwdBarrier::kDqFullWG1, h));
        if (leader) {
          float* const dst = tile_dq + h * kSlabFloats;
          if constexpr (kDeterministic) {
            add_in_turn(params, tile, n_block, m_block,
                        [&] { bulk_reduce_add_f32(dst, smem.dq.data() + h * kSlabFloats, kSlabBytes); });
          } else {
            bulk_reduce_add_f32(dst, smem.dq.data() + h * kSlabFloats, kSlabBytes);
            tma_store_arrive();
          }
        }
        __syncwarp();  // converged again before the next bar.sync (an .aligned barrier)
      }
      if (leader) tma_store_wait<0>();  // the buffers were read
      __syncwarp();
      if (m_block + 1 < m_max) {  // the storing warpgroups wait for these before their next store
        CUTE_UNROLL
        for (int h = 0; h < kDqSlabs; ++h) named_barrier_arrive(kDqSyncThreads, offset(BwdBarrier::kDqEmptyWG1, h));
      }
    }
    if (leader) bulk_wait_complete();
  }

  // dQ of one query block to the writer warp through shared memory (write_dq). Split dQ: each
  // warpgroup stores its slab once the writer has read the previous block's; publish_dq hands it
  // over later, after the next block's Sᵀ and dPᵀ were issued (consume). Otherwise warpgroup 0
  // stores its partial sum, warpgroup 1 adds its own to it (same thread -> same elements,
  // DqAccumOrder), then signals. Stores become visible to the bulk copy (async proxy) by a fence
  // in the signalling threads.
  template <typename Acc>
  __device__ void hand_over_dq(SharedStorage& smem, Acc const& acc_dq, bool wait_empty, int wg, int wtid) const {
    constexpr int kPairThreads = 2 * cutlass::NumThreadsPerWarpGroup;
    if constexpr (Traits::kDqSplit) {
      if (wait_empty) named_barrier_sync(kDqSyncThreads, offset(BwdBarrier::kDqEmptyWG1, wg));
      store_dq_smem<Traits>(acc_dq, smem.dq.data() + wg * Mainloop::kDqBufferFloats, wtid);
    } else {
      // One code path for both warpgroups (warpgroup 0 adds onto zeros): with two, ptxas kept
      // the accumulator in different registers on each side and spilled (D 96, kGeneral).
      if (wg == 0) {
        if (wait_empty) named_barrier_sync(kDqSyncThreads, BwdBarrier::kDqEmptyWG1);
      } else {
        named_barrier_sync(kPairThreads, BwdBarrier::kDqPartial);
      }
      add_dq_smem<Traits>(acc_dq, smem.dq.data(), wtid, /*load=*/wg != 0);
      if (wg == 0) {
        named_barrier_arrive(kPairThreads, BwdBarrier::kDqPartial);
      } else {
        publish_dq(0);
      }
    }
  }
  // The stored slab w to the writer: the fence makes this thread's stores visible to the bulk
  // reduce (async proxy), the barrier tells the writer.
  __device__ void publish_dq(int w) const {
    cutlass::arch::fence_view_async_shared();
    named_barrier_arrive(kDqSyncThreads, offset(BwdBarrier::kDqFullWG1, w));
  }

  // D 256 (Traits::kWide; bwd_kernel_traits.h): per query block, each warpgroup computes Sᵀ and dPᵀ
  // of its 32 queries, writes 16-bit Pᵀ and dSᵀ to shared memory, and after a barrier over both
  // warpgroups runs dV, dK and dQ on its half of the head dim with every operand in shared memory;
  // dQ goes to the writer warp through the warpgroup's halves of the stage's Q and dO buffers
  // (write_dq_wide). Pᵀ and dSᵀ are double-buffered by query
  // block: a warpgroup writes buffer s again two blocks later, after the barrier of the block in
  // between, which the other warpgroup reaches only once its products of block s retired.
  template <typename TStS, typename CopyR2S, typename TPt, typename TdSt, typename AccKV>
  __device__ void consume_wide(const Params& params, SharedStorage& smem, common::WorkTile& tile, int n_block,
                               const common::QueryBlockRange<kBlockM, kBlockN>& range, Pipeline& pipeline,
                               Mainloop& mainloop, const Variant& variant, TStS const& tStS,
                               CopyR2S const& copy_r2s, TPt tPsPt, TdSt tPsdS, AccKV& acc_dk, AccKV& acc_dv,
                               PipelineState& state, int wg, int wtid) const {
    typename Traits::TiledMmaSdP mma_sdp;
    typename Traits::TiledMmadQ mma_dq;
    auto thr_r2s = copy_r2s.get_thread_slice(wtid);
    constexpr int kKeys = Traits::kKeysPerWarpGroup, kQueries = Traits::kQueriesPerWarpGroup;
    CUTE_NO_UNROLL
    for (int m_block = range.m_min; m_block < range.m_max; ++m_block) {
      const int ps_stage = (m_block - range.m_min) % Traits::kDsStages;
      Tensor acc_s = partition_fragment_C(mma_sdp, Shape<Int<kKeys>, Int<kQueries>>{});  // ((2, 2, 4), 1, 1)
      Tensor acc_dp = partition_fragment_C(mma_sdp, Shape<Int<kKeys>, Int<kQueries>>{});
      pipeline.consumer_wait(state);
      const int stage = state.index();
      wait_boundary_qdo(tile, m_block, range.m_max);
      mainloop.issue_s(stage, acc_s);
      mainloop.issue_dp(stage, acc_dp);

      tile.m_block = m_block;
      const bool needs_mask = common::KeyBlockRange<kBlockM, kBlockN>(params.variant, tile).needs_mask(n_block);
      Tensor s = rowcol_view(acc_s);
      Tensor dp = rowcol_view(acc_dp);
      const float* lse_log2 = smem.stats.data() + stage * Mainloop::kStatsFloats;
      const float* dsum = lse_log2 + kBlockM;
      warpgroup_wait<0>();
      variant.template p_and_ds_transposed<kGeneral>(s, dp, tStS, m_block, n_block, needs_mask, lse_log2, dsum);
      {
        Tensor p16 = make_tensor<Element>(acc_s.layout());
        convert_into(acc_s, p16);
        copy(copy_r2s, thr_r2s.retile_S(p16), tPsPt(_, _, _, ps_stage));
        Tensor ds16 = make_tensor<Element>(acc_dp.layout());
        convert_into(acc_dp, ds16);
        copy(copy_r2s, thr_r2s.retile_S(ds16), tPsdS(_, _, _, ps_stage));
      }
      cutlass::arch::fence_view_async_shared();  // the wgmma below read them through the async proxy
      named_barrier_sync(Traits::kMmaThreads, BwdBarrier::kDsAll);
      Tensor acc_dq = partition_fragment_C(mma_dq, Shape<_64, Int<Traits::kDqCols>>{});  // ((2, 2, 16), 1, 1)
      mainloop.issue_dq(ps_stage, acc_dq);
      mainloop.issue_dv_smem(stage, ps_stage, acc_dv);
      mainloop.issue_dk_smem(stage, ps_stage, acc_dk);
      warpgroup_wait<0>();  // dQ, dV and dK retired: this warpgroup's halves of Q(m) and dO(m) are free
      warpgroup_fence_operand(acc_dq);
      // dQ to the writer warp through those halves (write_dq_wide); it adds them to dq_accum.
      if (m_block > range.m_min) named_barrier_sync(kDqSyncThreads, offset(BwdBarrier::kDqEmptyWG1, wg));
      store_dq_halves(acc_dq, wide_dq_half(smem.q.data(), stage, wg), wide_dq_half(smem.dO.data(), stage, wg), wtid);
      // At once, unlike the split dQ of D 128 (consume): the writer's read frees the stage for
      // its next load. Handed over after the next block's issue instead, the backward ran
      // 1.09-1.30x the time (H200, docs/perf.md session 30).
      publish_dq(wg);
      pipeline.consumer_release(state);  // every consumer thread arrives (pipeline.h kEveryThread)
      ++state;
    }
  }

  __device__ void consume(const Params& params, SharedStorage& smem, common::WorkTile& tile, int n_block,
                          const common::QueryBlockRange<kBlockM, kBlockN>& range, Pipeline& pipeline) const {
    // int, not unsigned: the coordinates below feed signed mask arithmetic (variant.h).
    const int mma_tid = static_cast<int>(threadIdx.x) - cutlass::NumThreadsPerWarpGroup;
    // 0 or 1: keys [64 wg, 64 wg + 64). Traits::kUniformWarpGroup: from a shuffle
    // (canonical_warp_group_idx), so ptxas knows it is the same in every thread of a warp and keeps
    // what derives from it, the wgmma descriptors of the warpgroup's rows, in uniform registers
    // instead of moving them there (R2UR) before each wgmma. Not in the softcap / ALiBi kernels
    // (4 bytes spilled).
    const int wg = Traits::kUniformWarpGroup && !kGeneral ? cutlass::canonical_warp_group_idx() - 1
                                                          : mma_tid / cutlass::NumThreadsPerWarpGroup;
    const int wtid = mma_tid % cutlass::NumThreadsPerWarpGroup;  // thread inside the warpgroup
    typename Traits::TiledMmaSdP mma_sdp;
    typename Traits::TiledMmadKV mma_dkv;
    typename Traits::TiledMmadQ mma_dq;
    constexpr int kDkvCols = Traits::kDkvCols;  // HDIM, or its half at D 256
    Tensor acc_dk = partition_fragment_C(mma_dkv, Shape<_64, Int<kDkvCols>>{});  // ((2, 2, COLS/8), 1, 1)
    Tensor acc_dv = partition_fragment_C(mma_dkv, Shape<_64, Int<kDkvCols>>{});
    clear(acc_dk);
    clear(acc_dv);

    if (!range.empty()) {
      Mainloop mainloop(smem, wtid, wg);
      const Variant variant(params.variant, tile);
      // (key, query) of this thread's Sᵀ / dPᵀ values in the (BLK_N, BLK_M) tile: the warpgroup's
      // keys are rows [64 wg, 64 wg + 64) (D 256: all 64 keys, queries [32 wg, 32 wg + 32)).
      constexpr int kKeys = Traits::kKeysPerWarpGroup, kQueries = Traits::kQueriesPerWarpGroup;
      const int key_tile = Traits::kWide ? 0 : wg, query_tile = Traits::kWide ? wg : 0;
      Tensor cSt = make_identity_tensor(Shape<Int<kBlockN>, Int<kBlockM>>{});
      Tensor cStw = local_tile(cSt, Shape<Int<kKeys>, Int<kQueries>>{},
                               make_coord(key_tile, query_tile));  // (64, QUERIES) -> (key, query)
      Tensor tStS = rowcol_view(mma_sdp.get_thread_slice(wtid).partition_C(cStw));  // (2 keys, 16 or 8 queries)
      // Traits::kStsmDs: stmatrix (four 8 x 8 16-bit matrices a warp, 16 bytes a thread), a
      // quarter of the 4-byte stores on the path between the dV and dK issues; else 4-byte stores.
      using R2S = std::conditional_t<Traits::kStsmDs, SM90_U32x4_STSM_N, AutoVectorizingCopyWithAssumedAlignment<32>>;
      auto copy_r2s = make_tiled_copy_C(Copy_Atom<R2S, Element>{}, mma_sdp);
      auto thr_r2s = copy_r2s.get_thread_slice(wtid);
      // The warpgroup's part of dSᵀ (or Pᵀ at D 256) in a (BLK_N, BLK_M, DS_STAGES) buffer.
      auto part_of = [&](Element* buffer) {
        Tensor sSt = make_tensor(make_smem_ptr(buffer), typename Traits::SmemLayoutdSt{});
        return thr_r2s.partition_D(
            local_tile(sSt, Shape<Int<kKeys>, Int<kQueries>, Int<Traits::kDsStages>>{},
                       make_coord(key_tile, query_tile, _0{})));
      };
      Tensor tPsdS = part_of(smem.ds.data());

      // dS: the warpgroup's four warps, or (split dQ) both warpgroups.
      const BwdBarrier ds_barrier = Traits::kDqSplit ? BwdBarrier::kDsAll : offset(BwdBarrier::kDsWG1, wg);
      constexpr int kDsThreads = Traits::kDqSplit ? Traits::kMmaThreads : cutlass::NumThreadsPerWarpGroup;
      PipelineState state;  // consumer: stage 0, phase 0
      smem.barrier_kv.wait(0);
      // Varlen, a key block reaching past its sequence: the next sequence's K and V rows zeroed
      // (zero_rows_from, varlen.h) before any product reads them, then kKvZeroed (below).
      const int mma_tid = wg * cutlass::NumThreadsPerWarpGroup + wtid;
      if constexpr (kVarlen) {
        if ((n_block + 1) * kBlockN > tile.k_len) {
          const int valid = tile.k_len - n_block * kBlockN;
          zero_rows_from<kBlockN, kHeadDim, Traits::kMmaThreads>(
              make_tensor(make_smem_ptr(smem.k.data()), typename Traits::SmemLayoutK{}), valid, mma_tid);
          zero_rows_from<kBlockN, kHeadDim, Traits::kMmaThreads>(
              make_tensor(make_smem_ptr(smem.v.data()), typename Traits::SmemLayoutK{}), valid, mma_tid);
          cutlass::arch::fence_view_async_shared();
          named_barrier_sync(Traits::kMmaThreads, kKvZeroed);
        }
      }
      if constexpr (Traits::kWide) {
        consume_wide(params, smem, tile, n_block, range, pipeline, mainloop, variant, tStS, copy_r2s,
                     part_of(smem.pt.data()), tPsdS, acc_dk, acc_dv, state, wg, wtid);
      } else {
        CUTE_NO_UNROLL
        for (int m_block = range.m_min; m_block < range.m_max; ++m_block) {
          const int ds_stage = Traits::kDsStages == 1 ? 0 : (m_block - range.m_min) % Traits::kDsStages;
          Tensor acc_s = partition_fragment_C(mma_sdp, Shape<_64, Int<kBlockM>>{});  // ((2, 2, BLK_M/8), 1, 1)
          Tensor acc_dp = partition_fragment_C(mma_sdp, Shape<_64, Int<kBlockM>>{});
          pipeline.consumer_wait(state);
          const int stage = state.index();
          wait_boundary_qdo(tile, m_block, range.m_max);
          mainloop.issue_s(stage, acc_s);
          mainloop.issue_dp(stage, acc_dp);  // both in flight together
          // Split dQ: the previous block's slab, stored at the end of that block, goes to the
          // writer now: the fence and the barrier wait under Sᵀ and dPᵀ instead of before them
          // (0.93-0.97x the backward's time at D 128, H200, docs/perf.md session 30).
          if (Traits::kDqSplit && m_block > range.m_min) publish_dq(wg);

          tile.m_block = m_block;
          const bool needs_mask =
              common::KeyBlockRange<kBlockM, kBlockN>(params.variant, tile).needs_mask(n_block);
          Tensor s = rowcol_view(acc_s);
          Tensor dp = rowcol_view(acc_dp);
          const float* lse_log2 = smem.stats.data() + stage * Mainloop::kStatsFloats;  // the block's row_stats
          const float* dsum = lse_log2 + kBlockM;
          Tensor p16 = make_tensor<Element>(acc_s.layout());
          Tensor ds16 = make_tensor<Element>(acc_dp.layout());
          auto pt = make_tensor(p16.data(), acc_as_a_operand(acc_s.layout()));
          auto dst = make_tensor(ds16.data(), acc_as_a_operand(acc_dp.layout()));
          warpgroup_wait<0>();
          variant.template p_and_ds_transposed<kGeneral>(s, dp, tStS, m_block, n_block, needs_mask, lse_log2, dsum);
          convert_into(acc_s, p16);
          mainloop.issue_dv(stage, pt, acc_dv);
          convert_into(acc_dp, ds16);
          copy(copy_r2s, thr_r2s.retile_S(ds16), tPsdS(_, _, _, ds_stage));
          // The dQ wgmma reads what the warps wrote, through the async proxy.
          cutlass::arch::fence_view_async_shared();
          mainloop.issue_dk(stage, dst, acc_dk);
          named_barrier_sync(kDsThreads, ds_barrier);  // while dV and dK run
          // dQ once dV retired: with Pᵀ, dSᵀ (registers of the RS products) and dQ's accumulator
          // live together, ptxas spills (D 128).
          warpgroup_wait<1>();
          Tensor acc_dq = partition_fragment_C(mma_dq, Shape<Int<kBlockM>, Int<Traits::kDqCols>>{});
          // ((2, 2, COLS/8), BLK_M/64, 1)
          mainloop.issue_dq(ds_stage, acc_dq);
          warpgroup_wait<1>();  // dK retired
          // This thread has read its rows' LSE and D of the stage (they fed Pᵀ and dSᵀ) and its
          // warpgroup's wgmma reading Q(m) and dO(m) retired: it arrives on the stage's empty barrier
          // itself (every consumer thread does, pipeline.h kEveryThread), so the producer's next bulk
          // copy into the stage is ordered after every reader, as racecheck models it.
          pipeline.consumer_release(state);  // Q(m), dO(m), LSE, D read
          ++state;
          warpgroup_wait<0>();  // dQ
          hand_over_dq(smem, acc_dq, m_block > range.m_min, wg, wtid);
        }
        if constexpr (Traits::kDqSplit) publish_dq(wg);  // the last block's slab
      }
    }
    store_dkv<Traits, kDeterministic>(acc_dk, acc_dv, params.grad, tile, n_block, wg, wtid,
                                      params.variant.softmax_scale, params.kv_group,
                                      params.scheduler.seqlen_k, params.head_dim);
  }
};

}  // namespace sm90
}  // namespace flashlab
