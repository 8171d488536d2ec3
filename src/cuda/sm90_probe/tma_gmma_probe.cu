// Compile-only toolchain probe for the planned cuda_sm90 forward (docs/design/sm90-forward.md).
// NOT part of libflashlab or CI: tools/sm90_probe.sh builds it with nvcc for sm_90a and greps the
// ptxas report for spills, an ignored setmaxnreg (C7508) and the wgmma serialization messages
// (C7510-C7519; ptxas prints them as "info", so --warning-as-error does not catch them).
//
// What it proves compiles, with the pinned CUTLASS/CuTe headers, in the shape the real kernel uses:
//   - a TMA load (SM90_TMA_LOAD) of a (128, 128) bf16 tile of Q from a 4-D (seqlen, d, head, batch)
//     tensor, completing on a ClusterTransactionBarrier, and K/V tiles streamed through a 2-stage
//     cutlass::PipelineTmaAsync (cluster size 1), released once per consumer warpgroup;
//   - one producer warpgroup (setmaxnreg.dec to 24) and two consumer warpgroups (setmaxnreg.inc to
//     240), FA3's split for two MMA warpgroups;
//   - S = Q Kᵀ as SS wgmma (64x128x16 per warpgroup, both operands from smem descriptors), then
//     O += P V as RS wgmma (P from registers, re-viewed from the S accumulator; V read transposed
//     from the same K-major smem buffer, so B is MN-major);
//   - between them flashlab's common ScoreVariant (mask), OnlineSoftmax and Dropout<true> on a
//     (row, col) view of the wgmma accumulator;
//   - two kernels: probe_kernel<false> waits for each GEMM (FA3's ablation stages 1-3),
//     probe_kernel<true> overlaps Q·K(n) with P(n-1)·V(n-1) (stage 4).
// The numbers it computes are meaningless (V aliases K, nothing is checked): only ptxas's report
// matters. It never ran; on a GPU, give it a main that checks one tile against the CPU first.
// cute/tensor.hpp first: included after the CUTLASS headers, cute/algorithm/copy.hpp fails to
// compile (nvcc 13.0, CUTLASS 4.2: "copy_if has already been declared").
#include <cute/tensor.hpp>

#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/cutlass.h>
#include <cutlass/numeric_types.h>
#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include <cuda_runtime.h>

#include <cstdint>

// flashlab's architecture-neutral pieces, fed the wgmma accumulator through a (row, col) view: the
// probe checks that they compile on sm90 fragments and keep the wgmma batches unserialized.
#include "cuda/common/dropout.h"
#include "cuda/common/kernel_args.h"
#include "cuda/common/softmax.h"
#include "cuda/common/tile_scheduler.h"
#include "cuda/common/variant.h"
#include "cuda/sm90/fragments.h"
#include "cuda/sm90/pipeline.h"

namespace flashlab::sm90_probe {

using namespace cute;

using Element = cutlass::bfloat16_t;
using ElementAccum = float;

constexpr int kBlockM = 128;
constexpr int kBlockN = 128;
constexpr int kHeadDim = 128;
constexpr int kStages = 2;
constexpr int kNumMmaWarpGroups = 2;
constexpr int kThreads = cutlass::NumThreadsPerWarpGroup * (1 + kNumMmaWarpGroups);
// FA3's setmaxnreg split for one producer + two consumer warpgroups: 24 + 2 * 240 = 504 <= 512
// registers a thread-slot over the three warpgroups (65536 / 384 = 170 at entry).
constexpr uint32_t kProducerRegs = 24;
constexpr uint32_t kConsumerRegs = 240;

using TileQ = Shape<Int<kBlockM>, Int<kHeadDim>>;  // (BLK_M, HDIM)
using TileK = Shape<Int<kBlockN>, Int<kHeadDim>>;  // (BLK_N, HDIM)

// 128-byte swizzle, K (head-dim) contiguous: the layout both TMA and the GMMA descriptors accept.
using SmemLayoutQ = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, TileQ{}));  // (BLK_M, HDIM)
using SmemLayoutK =
    decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                           Shape<Int<kBlockN>, Int<kHeadDim>, Int<kStages>>{}));  // (BLK_N, HDIM, STAGES)
// Vᵀ: the same bytes as a K-major V tile, viewed (HDIM, BLK_N): the PV GEMM's B operand, MN-major.
using SmemLayoutVt = decltype(composition(
    SmemLayoutK{}, make_ordered_layout(Shape<Int<kHeadDim>, Int<kBlockN>, Int<kStages>>{},
                                       Step<_2, _1, _3>{})));  // (HDIM, BLK_N, STAGES)

// Warpgroups tile M: each consumer warpgroup owns 64 rows of the 128-row Q tile.
using MmaWarpGroups = Layout<Shape<Int<kNumMmaWarpGroups>, _1, _1>>;
using TiledMmaQK = decltype(make_tiled_mma(
    SM90::GMMA::MMA_64x128x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::K>{}, MmaWarpGroups{}));
using TiledMmaPV = decltype(make_tiled_mma(
    SM90::GMMA::MMA_64x128x16_F32BF16BF16_RS<GMMA::Major::K, GMMA::Major::MN>{}, MmaWarpGroups{}));

// (seqlen, d, head, batch) with the head dim contiguous: the shape the real mainloop's TMA uses.
using ShapeQKV = Shape<int32_t, int32_t, int32_t, int32_t>;
using StrideQKV = Stride<int64_t, _1, int64_t, int64_t>;

using TmaQ = decltype(make_tma_copy(
    SM90_TMA_LOAD{},
    make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)), ShapeQKV{}, StrideQKV{}), SmemLayoutQ{},
    TileQ{}, _1{}));
using TmaK = decltype(make_tma_copy(
    SM90_TMA_LOAD{},
    make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)), ShapeQKV{}, StrideQKV{}),
    take<0, 2>(SmemLayoutK{}), TileK{}, _1{}));

// The once-per-warpgroup release pipeline of the real kernel (src/cuda/sm90/pipeline.h).
using flashlab::sm90::PipelineTmaAsyncWarpgroupRelease;
using PipelineK = PipelineTmaAsyncWarpgroupRelease<kStages>;

constexpr uint32_t kTmaBytesQ = static_cast<uint32_t>(size(SmemLayoutQ{}) * sizeof(Element));
constexpr uint32_t kTmaBytesK = static_cast<uint32_t>(size(take<0, 2>(SmemLayoutK{})) * sizeof(Element));

struct SharedStorage {
  array_aligned<Element, cosize_v<SmemLayoutQ>, 1024> smem_q;  // SW128 needs 1024-byte alignment
  array_aligned<Element, cosize_v<SmemLayoutK>, 1024> smem_k;
  cutlass::arch::ClusterTransactionBarrier barrier_q;
  PipelineK::SharedStorage pipeline_k;
};

struct Params {
  TmaQ tma_q;
  TmaK tma_k;
  ShapeQKV shape_q;
  ShapeQKV shape_k;
  int n_blocks;
  float* o;
  float* lse;
  flashlab::common::SeqArgs seq;
  flashlab::common::ScoreArgs score;
  flashlab::common::DropoutArgs dropout;
};

// The accumulator views of the real kernel (src/cuda/sm90/fragments.h).
template <class AccLayout>
CUTE_HOST_DEVICE constexpr auto acc_rowcol(AccLayout const& acc) {
  return flashlab::sm90::rowcol_layout(acc);
}
using flashlab::sm90::acc_as_a_operand;

// D (+)= A B over the K mode, as one wgmma batch; zero_init overwrites D first (S = Q Kᵀ).
// kAInRegisters must be said: cute::is_rmem is also true of a tensor of GMMA smem descriptors
// (found here: the fence then fails to compile on the descriptor iterator).
// warpgroup_gemm_issue leaves the batch in flight (committed, not waited for): the intra-warpgroup
// overlap issues Q·K(n+1) and P(n)·V(n) back to back and waits for them one at a time.
template <bool kZeroInit, bool kAInRegisters, class TiledMma, class TA, class TB, class TC>
CUTE_DEVICE void warpgroup_gemm_issue(TiledMma& mma, TA const& a, TB const& b, TC& c) {
  if constexpr (kAInRegisters) {
    warpgroup_fence_operand(const_cast<TA&>(a));
  }
  warpgroup_fence_operand(c);
  warpgroup_arrive();
  mma.accumulate_ = kZeroInit ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
  CUTE_UNROLL
  for (int k = 0; k < size<2>(a); ++k) {
    cute::gemm(mma, a(_, _, k), b(_, _, k), c);
    mma.accumulate_ = GMMA::ScaleOut::One;
#ifdef FLASHLAB_PROBE_SERIALIZE
    // Negative test of tools/sm90_probe.sh: an ordinary instruction writing the accumulator inside
    // the wgmma batch, which ptxas answers by serializing the batch (nvcc 13.0: C7519 arrive
    // injected, C7517 wait injected, C7511 serialized).
    c(0) += 1.0f;
#endif
  }
  warpgroup_commit_batch();
}

template <bool kZeroInit, bool kAInRegisters, class TiledMma, class TA, class TB, class TC>
CUTE_DEVICE void warpgroup_gemm(TiledMma& mma, TA const& a, TB const& b, TC& c) {
  warpgroup_gemm_issue<kZeroInit, kAInRegisters>(mma, a, b, c);
  warpgroup_wait<0>();
  warpgroup_fence_operand(c);
  if constexpr (kAInRegisters) {
    warpgroup_fence_operand(const_cast<TA&>(a));
  }
}

// OnlineSoftmax::update without the O rescale (the split docs/design/sm90-forward.md §4 proposes
// for common/softmax.h): with P(n)·V(n) in flight, O may be touched only after its wait.
template <int kRows, class TensorS>
CUTE_DEVICE void softmax_stats(flashlab::common::OnlineSoftmax<kRows>& sm, TensorS& s, float scale_log2,
                               float (&alpha)[kRows]) {
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    float m = sm.row_max[r];
    CUTE_UNROLL
    for (int c = 0; c < size<1>(s); ++c) m = fmaxf(m, s(r, c));
    m = flashlab::common::quad_max(m);
    const float m_scaled = m == -INFINITY ? 0.0f : m * scale_log2;
    alpha[r] = flashlab::common::fast_exp2(sm.row_max[r] * scale_log2 - m_scaled);
    sm.row_max[r] = m;
    float sum = 0.0f;
    CUTE_UNROLL
    for (int c = 0; c < size<1>(s); ++c) {
      s(r, c) = flashlab::common::fast_exp2(fmaf(s(r, c), scale_log2, -m_scaled));
      sum += s(r, c);
    }
    sm.row_sum[r] = sm.row_sum[r] * alpha[r] + sum;
  }
}
template <int kRows, class TensorO>
CUTE_DEVICE void rescale(TensorO& o, float const (&alpha)[kRows]) {
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    CUTE_UNROLL
    for (int c = 0; c < size<1>(o); ++c) o(r, c) *= alpha[r];
  }
}

// kOverlap = false: FA3's ablation stages 1-3 (each GEMM waited for at once).
// kOverlap = true: stage 4, the intra-warpgroup overlap: Q·K(n+1) and P(n)·V(n) in flight together,
// the softmax of n+1 between their waits, O rescaled after P(n)·V(n) retired.
template <bool kOverlap>
__global__ void __launch_bounds__(kThreads, 1) probe_kernel(CUTE_GRID_CONSTANT Params const params) {
  extern __shared__ __align__(1024) char smem_raw[];
  SharedStorage& smem = *reinterpret_cast<SharedStorage*>(smem_raw);

  int const warp_idx = cutlass::canonical_warp_idx_sync();
  int const warp_group_idx = cutlass::canonical_warp_group_idx();
  int const thread_in_group = threadIdx.x % cutlass::NumThreadsPerWarpGroup;
  bool const lane_predicate = cute::elect_one_sync();

  if (warp_idx == 0 && lane_predicate) {
    prefetch_tma_descriptor(params.tma_q.get_tma_descriptor());
    prefetch_tma_descriptor(params.tma_k.get_tma_descriptor());
    smem.barrier_q.init(1);
  }

  PipelineK::Params pipeline_params;
  pipeline_params.transaction_bytes = kTmaBytesK;
  pipeline_params.role =
      warp_group_idx == 0 ? PipelineK::ThreadCategory::Producer : PipelineK::ThreadCategory::Consumer;
  pipeline_params.is_leader = thread_in_group == 0;
  pipeline_params.num_consumers = cutlass::NumThreadsPerWarpGroup * kNumMmaWarpGroups;
  PipelineK pipeline(smem.pipeline_k, pipeline_params);
  __syncthreads();  // barrier inits visible to every warp (cluster_sync() once clusters > 1)

  Tensor sQ = make_tensor(make_smem_ptr(smem.smem_q.data()), SmemLayoutQ{});    // (BLK_M, HDIM)
  Tensor sK = make_tensor(make_smem_ptr(smem.smem_k.data()), SmemLayoutK{});    // (BLK_N, HDIM, STAGES)
  Tensor sVt = make_tensor(make_smem_ptr(smem.smem_k.data()), SmemLayoutVt{});  // (HDIM, BLK_N, STAGES)

  if (warp_group_idx == 0) {  // producer: one elected thread issues every TMA
    cutlass::arch::warpgroup_reg_dealloc<kProducerRegs>();
    if (warp_idx == 0 && lane_predicate) {
      Tensor mQ = params.tma_q.get_tma_tensor(params.shape_q);            // (seqlen_q, d, head, batch)
      Tensor mK = params.tma_k.get_tma_tensor(params.shape_k);            // (seqlen_k, d, head, batch)
      Tensor gQ = local_tile(mQ(_, _, 0, 0), TileQ{}, make_coord(0, 0));  // (BLK_M, HDIM)
      Tensor gK = local_tile(mK(_, _, 0, 0), TileK{}, make_coord(_, 0));  // (BLK_N, HDIM, n_blocks)
      auto [tQgQ, tQsQ] = tma_partition(params.tma_q, _0{}, Layout<_1>{}, group_modes<0, 2>(sQ),
                                        group_modes<0, 2>(gQ));  // (TMA), (TMA)
      auto [tKgK, tKsK] = tma_partition(params.tma_k, _0{}, Layout<_1>{}, group_modes<0, 2>(sK),
                                        group_modes<0, 2>(gK));  // (TMA, n_blocks), (TMA, STAGES)
      smem.barrier_q.arrive_and_expect_tx(kTmaBytesQ);
      copy(params.tma_q.with(reinterpret_cast<uint64_t&>(smem.barrier_q), /*mcast_mask=*/0), tQgQ, tQsQ);
      auto state = cutlass::make_producer_start_state<PipelineK>();
      for (int n = 0; n < params.n_blocks; ++n) {
        pipeline.producer_acquire(state);
        copy(params.tma_k.with(*pipeline.producer_get_barrier(state), 0), tKgK(_, n), tKsK(_, state.index()));
        ++state;
      }
      pipeline.producer_tail(state);  // do not exit while consumers may still arrive on our barriers
    }
  } else {  // consumers: two warpgroups, 64 rows each
    cutlass::arch::warpgroup_reg_alloc<kConsumerRegs>();
    int const mma_thread = threadIdx.x - cutlass::NumThreadsPerWarpGroup;
    TiledMmaQK mma_qk;
    TiledMmaPV mma_pv;
    auto thr_qk = mma_qk.get_thread_slice(mma_thread);
    auto thr_pv = mma_pv.get_thread_slice(mma_thread);
    Tensor tSrQ = thr_qk.partition_fragment_A(sQ);        // (MMA, MMA_M, MMA_K) smem descriptors
    Tensor tSrK = thr_qk.partition_fragment_B(sK);        // (MMA, MMA_N, MMA_K, STAGES)
    Tensor tOrV = thr_pv.partition_fragment_B(sVt);       // (MMA, MMA_N, MMA_K, STAGES)
    Tensor tOrO = partition_fragment_C(mma_pv, TileQ{});  // ((2, 2, HDIM/8), MMA_M, MMA_N) fp32
    clear(tOrO);
    Tensor o_rc = make_tensor(tOrO.data(), acc_rowcol(tOrO.layout()));      // (rows, HDIM cols)
    Tensor cS = make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{});  // (BLK_M, BLK_N) -> (row, col)
    Tensor tScS_acc = thr_qk.partition_C(cS);                               // like the S accumulator
    Tensor tScS = make_tensor(tScS_acc.data(), acc_rowcol(tScS_acc.layout()));  // (rows, cols) -> (row, col)
    static_assert(decltype(size<0>(tScS))::value == 2, "two rows per thread per consumer warpgroup");
    static_assert(decltype(size<1>(tScS))::value == kBlockN / 4, "a quad holds a row");

    flashlab::common::WorkTile tile;
    tile.set_sequence(params.seq, 0);
    const flashlab::common::ScoreVariant<kBlockM, kBlockN> variant(params.score, tile);
    const flashlab::common::Dropout<true> dropout(params.dropout, tile, params.seq.heads_q);
    flashlab::common::OnlineSoftmax<2> softmax;

    smem.barrier_q.wait(0);
    cutlass::PipelineState<kStages> state;
    // P as the RS A operand: the registers of a 16-bit copy of S, re-viewed (no data movement).
    Tensor tSrS =
        partition_fragment_C(mma_qk, Shape<Int<kBlockM>, Int<kBlockN>>{});  // ((2, 2, BLK_N/8), MMA_M, MMA_N)
    Tensor s = make_tensor(tSrS.data(), acc_rowcol(tSrS.layout()));         // (rows, cols)
    Tensor tSrP = make_tensor_like<Element>(tSrS);                          // same register order as S
    Tensor tOrP = make_tensor(tSrP.data(), acc_as_a_operand(tSrS.layout()));  // ((2, 2, 2), MMA_M, BLK_N/16)
    auto convert_p = [&]() {
      CUTE_UNROLL
      for (int i = 0; i < size(tSrS); ++i) tSrP(i) = static_cast<Element>(tSrS(i));
    };
    if constexpr (!kOverlap) {
      for (int n = 0; n < params.n_blocks; ++n) {
        pipeline.consumer_wait(state);
        warpgroup_gemm</*kZeroInit=*/true, /*kAInRegisters=*/false>(mma_qk, tSrQ,
                                                                    tSrK(_, _, _, state.index()), tSrS);
        variant.template before_softmax</*kMask=*/true>(s, tScS, n);
        softmax.update(s, o_rc, variant.softmax_scale_log2());
        dropout.apply(s, tScS, 0, n * kBlockN);
        convert_p();
        warpgroup_gemm</*kZeroInit=*/false, /*kAInRegisters=*/true>(mma_pv, tOrP,
                                                                    tOrV(_, _, _, state.index()), tOrO);
        pipeline.consumer_release(state);
        ++state;
      }
    } else if (params.n_blocks > 0) {
      // Block 0 alone (peeled), then each iteration overlaps S(n) with P(n-1)·V(n-1).
      pipeline.consumer_wait(state);
      warpgroup_gemm</*kZeroInit=*/true, /*kAInRegisters=*/false>(mma_qk, tSrQ, tSrK(_, _, _, state.index()),
                                                                  tSrS);
      variant.template before_softmax</*kMask=*/true>(s, tScS, 0);
      float alpha[2];
      softmax_stats(softmax, s, variant.softmax_scale_log2(), alpha);  // O is 0: no rescale
      dropout.apply(s, tScS, 0, 0);
      convert_p();
      cutlass::PipelineState<kStages> prev = state;
      ++state;
      for (int n = 1; n < params.n_blocks; ++n) {
        pipeline.consumer_wait(state);
        warpgroup_gemm_issue</*kZeroInit=*/true, /*kAInRegisters=*/false>(mma_qk, tSrQ,
                                                                          tSrK(_, _, _, state.index()), tSrS);
        warpgroup_gemm_issue</*kZeroInit=*/false, /*kAInRegisters=*/true>(mma_pv, tOrP,
                                                                          tOrV(_, _, _, prev.index()), tOrO);
        warpgroup_wait<1>();  // Q·K(n) done; P(n-1)·V(n-1) may still run
        warpgroup_fence_operand(tSrS);
        variant.template before_softmax</*kMask=*/true>(s, tScS, n);
        softmax_stats(softmax, s, variant.softmax_scale_log2(), alpha);
        dropout.apply(s, tScS, 0, n * kBlockN);
        warpgroup_wait<0>();  // P(n-1)·V(n-1) done: O and P's registers are ours again
        warpgroup_fence_operand(tOrO);
        warpgroup_fence_operand(tOrP);
        pipeline.consumer_release(prev);
        rescale(o_rc, alpha);
        convert_p();
        prev = state;
        ++state;
      }
      warpgroup_gemm</*kZeroInit=*/false, /*kAInRegisters=*/true>(mma_pv, tOrP, tOrV(_, _, _, prev.index()),
                                                                  tOrO);
      pipeline.consumer_release(prev);
    }
    float lse[2];
    softmax.finalize(o_rc, variant.lse_scale(), dropout.keep_scale(), lse);
    if (mma_thread % 4 == 0) {
      params.lse[get<0>(tScS(0, 0))] = lse[0];
      params.lse[get<0>(tScS(1, 0))] = lse[1];
    }
    // Plain stores keep the accumulator live; the real epilogue goes through smem + TMA store.
    float* o = params.o + mma_thread * size(tOrO);
    CUTE_UNROLL
    for (int i = 0; i < size(tOrO); ++i) {
      o[i] = tOrO(i);
    }
  }
}

// Host side: build the TMA descriptors (host-only CUDA driver call inside make_tma_copy) and
// launch with a cluster of 1 (a plain launch; cluster dims > 1 would go through
// cutlass::launch_kernel_on_cluster).
template <bool kOverlap>
cudaError_t launch(Element const* q, Element const* k, float* o, float* lse, int seqlen_q, int seqlen_k,
                   float softmax_scale, cudaStream_t stream) {
  flashlab::common::SeqArgs seq;
  seq.batch = 1;
  seq.heads_q = 1;
  seq.seqlen_q = seqlen_q;
  seq.seqlen_k = seqlen_k;
  flashlab::common::ScoreArgs score;
  score.softmax_scale = softmax_scale;
  flashlab::common::DropoutArgs dropout;
  ShapeQKV shape_q{seqlen_q, kHeadDim, 1, 1};
  ShapeQKV shape_k{seqlen_k, kHeadDim, 1, 1};
  StrideQKV stride{int64_t(kHeadDim), _1{}, int64_t(seqlen_q) * kHeadDim, int64_t(seqlen_q) * kHeadDim};
  StrideQKV stride_k{int64_t(kHeadDim), _1{}, int64_t(seqlen_k) * kHeadDim, int64_t(seqlen_k) * kHeadDim};
  Params params{make_tma_copy(SM90_TMA_LOAD{}, make_tensor(make_gmem_ptr(q), shape_q, stride), SmemLayoutQ{},
                              TileQ{}, _1{}),
                make_tma_copy(SM90_TMA_LOAD{}, make_tensor(make_gmem_ptr(k), shape_k, stride_k),
                              take<0, 2>(SmemLayoutK{}), TileK{}, _1{}),
                shape_q,
                shape_k,
                seqlen_k / kBlockN,
                o,
                lse,
                seq,
                score,
                dropout};
  int const smem_bytes = int(sizeof(SharedStorage));
  cudaError_t err =
      cudaFuncSetAttribute(probe_kernel<kOverlap>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  if (err != cudaSuccess) {
    return err;
  }
  probe_kernel<kOverlap><<<1, kThreads, smem_bytes, stream>>>(params);
  return cudaGetLastError();
}

// Both kernels, so that one nvcc run reports ptxas's verdict on each.
template cudaError_t launch<false>(Element const*, Element const*, float*, float*, int, int, float,
                                   cudaStream_t);
template cudaError_t launch<true>(Element const*, Element const*, float*, float*, int, int, float,
                                  cudaStream_t);

}  // namespace flashlab::sm90_probe
