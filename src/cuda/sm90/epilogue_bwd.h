// src/cuda/sm90/epilogue_bwd.h — where the Hopper backward's accumulators go.
//
//   store_dq_smem   one warpgroup's dQ contribution (64 × kDqCols, fp32, unscaled) -> its shared
//                   buffer, in the dq_accum tile's order (DqAccumOrder, below)
//   DqWriter        warp 1 of the producer warpgroup: each buffer -> the query block's dq_accum
//                   tile by one bulk reduce-add (cp.reduce.async.bulk .add.f32, the TMA unit);
//                   in the deterministic mode after the tile's semaphore reached the warpgroup's
//                   turn, then the semaphore advanced (DqSemaphore)
//   BwdConvertDq    kernel: dq_accum tile · scale -> dQ (the dtype), after the main kernel
//   store_dkv       dK · scale and dV of one warpgroup's 64 keys, by BwdGradArgs::dkv_mode:
//                   kDirect -> the dtype outputs; kAtomic -> fp32 atomics into the kv head's
//                   workspace slice (GQA; common::bwd_convert_dkv_kernel converts afterwards);
//                   kPartial (GQA, deterministic) -> plain fp32 stores into the query head's
//                   own slice (the converter sums the group's slices in head order)
// Every store to an output is predicated on rows < the sequence length and columns < head_dim.
// The stores go straight from the accumulator fragments (two adjacent columns per 4-byte store).
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>

#include <cutlass/numeric_types.h>

#include "cuda/common/bwd_workspace.h"
#include "cuda/common/kernel_args.h"
#include "cuda/common/tile_scheduler.h"
#include "cuda/sm90/fragments.h"
#include "cuda/sm90/pipeline.h"  // BwdBarrier

namespace flashlab {
namespace sm90 {

using namespace cute;

// dq_accum inside a tile of 64 × HDIM floats (common/bwd_workspace.h): kDqSlabs slabs of
// 64 × kDqCols (bwd_kernel_traits.h), slab h holding columns [h · kDqCols, (h + 1) · kDqCols); in a
// slab, thread t's accumulator values i = 4c + v of the TiledMmadQ fragment go to c · 512 + 4t + v,
// so the 32 lanes of a warp cover 512 consecutive bytes with one float4 each. The shared buffers
// the consumers hand to the writer warp use the same order, so a slab moves as one 1-D bulk copy.
// With the split dQ warpgroup w adds to slab w; otherwise both add their partial sums to the one
// slab.
struct DqAccumOrder {
  static constexpr int kVec = 4;
  CUTE_DEVICE static int index(int i, int wtid) {
    return (i / kVec) * (cutlass::NumThreadsPerWarpGroup * kVec) + wtid * kVec + i % kVec;
  }
};

template <typename Traits>
CUTE_DEVICE float* dq_accum_tile(const common::BwdGradArgs& g, const common::WorkTile& t, int m_block,
                                 int seqlen_q, int heads_q) {
  static_assert(common::kDqAccumRowAlign % Traits::kBlockM == 0, "the workspace reserves whole tiles");
  return g.dq_accum + common::dq_accum_tile_offset(t.batch, m_block, t.head, seqlen_q, heads_q,
                                                   Traits::kBlockM, Traits::kBucket);
}

// acc_dq: ((2, 2, COLS/8), 1, 1) fp32 of TiledMmadQ -> `buf` (64 × kDqCols floats in shared memory)
// in DqAccumOrder: a warp's 32 lanes write 512 consecutive bytes per float4 store (no bank
// conflict), and the buffer is byte for byte a slab of the dq_accum tile, so one 1-D bulk
// reduce-add moves it. No predicates: the tile has room for every row and column; rows past the
// sequence and columns past head_dim hold exact zeros (zero-filled Q / dO rows give P = 0 there,
// zero-filled K columns give 0).
template <typename Traits, typename Acc>
CUTE_DEVICE void store_dq_smem(Acc const& acc_dq, float* buf, int wtid) {
  static_assert(decltype(size(acc_dq))::value % DqAccumOrder::kVec == 0, "whole vectors per thread");
  CUTE_UNROLL
  for (int i = 0; i < size(acc_dq); i += DqAccumOrder::kVec) {
    *reinterpret_cast<float4*>(buf + DqAccumOrder::index(i, wtid)) =
        make_float4(acc_dq(i), acc_dq(i + 1), acc_dq(i + 2), acc_dq(i + 3));
  }
}

// buf = (load ? buf : 0) + acc_dq in the same order (the non-split dQ: warpgroup 1's partial sum
// onto warpgroup 0's).
template <typename Traits, typename Acc>
CUTE_DEVICE void add_dq_smem(Acc const& acc_dq, float* buf, int wtid, bool load) {
  CUTE_UNROLL
  for (int i = 0; i < size(acc_dq); i += DqAccumOrder::kVec) {
    float4* p = reinterpret_cast<float4*>(buf + DqAccumOrder::index(i, wtid));
    const float4 v = load ? *p : make_float4(0.f, 0.f, 0.f, 0.f);
    *p = make_float4(v.x + acc_dq(i), v.y + acc_dq(i + 1), v.z + acc_dq(i + 2), v.w + acc_dq(i + 3));
  }
}

// D 256: a warpgroup's dQ slab (64 × 128 fp32 in DqAccumOrder, 32 KiB) into two 16 KiB buffers:
// the slab's first half (fragment values [0, N/2): DqAccumOrder floats [0, 4096)) into `lo`, the
// second into `hi` (flash_bwd_kernel.h, consume_wide: its halves of the stage's Q and dO).
template <typename Acc>
CUTE_DEVICE void store_dq_halves(Acc const& acc_dq, float* lo, float* hi, int wtid) {
  constexpr int kSize = decltype(size(acc_dq))::value, kHalf = kSize / 2;
  static_assert(kHalf % DqAccumOrder::kVec == 0, "whole vectors per half");
  CUTE_UNROLL
  for (int i = 0; i < kSize; i += DqAccumOrder::kVec) {
    float* const buf = i < kHalf ? lo : hi;  // DqAccumOrder::index(i) = index(i - kHalf) + the half's floats
    *reinterpret_cast<float4*>(buf + DqAccumOrder::index(i % kHalf, wtid)) =
        make_float4(acc_dq(i), acc_dq(i + 1), acc_dq(i + 2), acc_dq(i + 3));
  }
}

// The bulk-copy PTX the pinned CUTLASS lacks (its SM90_BULK_REDUCE_ADD is not in 4.2's headers):
// dst (global) += src (shared::cta), `bytes` a multiple of 16, both 16-byte aligned, element-wise
// atomic; tracked by the issuing thread's bulk async-group (cute::tma_store_arrive commits it).
CUTE_DEVICE void bulk_reduce_add_f32(float* dst, const float* src, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst),
               "r"(cute::cast_smem_ptr_to_uint(src)), "r"(bytes)
               : "memory");
}
// Waits until every committed bulk group of this thread has completed, its global writes included
// (cute::tma_store_wait<0> waits for the shared-memory reads only).
CUTE_DEVICE void bulk_wait_complete() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
// Orders this thread's async-proxy (bulk) global accesses with its generic ones (the semaphore).
CUTE_DEVICE void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;\n" ::: "memory"); }

// The deterministic mode's order of the adds to one dq_accum tile (docs/design/sm90-backward.md §5).
// The tile's int semaphore (common::dq_semaphore_index, zeroed by the prologue) counts warpgroup
// slabs already added. The writer's lane 0 spins on an acquire load until the count reaches the
// CTA's turn, adds each slab, and advances the count by one per slab (release). The count only
// grows, so "reached" is >=: the kSlabs slabs of a CTA (disjoint columns) share one turn
// kSlabs · r, and the count reaches kSlabs · (r + 1) only once all of rank r were added.
struct DqSemaphore {
  CUTE_DEVICE static int load_acquire(const int* sem) {
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(sem) : "memory");
    return v;
  }
  // fence.acq_rel.gpu then a relaxed add: a release of everything this thread observed
  // (CUTLASS's GenericBarrier::arrive_inc).
  CUTE_DEVICE static void advance_release(int* sem) {
    asm volatile("fence.acq_rel.gpu;\n\tred.relaxed.gpu.global.add.s32 [%0], 1;" ::"l"(sem) : "memory");
  }
  // The turn of the CTA whose rank among the tile's key blocks is `rank`.
  template <int kSlabs>
  CUTE_DEVICE static int turn(int rank) {
    return kSlabs * rank;
  }
};

// Writes acc · scale (an accumulator of TiledMma over a (64, HDIM) tile; values i and i + 1 are two
// adjacent columns of one row) to the row-major tile at `dst`: rows < valid_rows, columns <
// head_dim. Op(T* two_values, float a, float b) writes one pair.
template <typename TiledMma, int kHeadDim, typename T, typename Acc, typename Op>
CUTE_DEVICE void write_pairs(Acc const& acc, float scale, T* dst, int64_t row_stride, int valid_rows,
                             int head_dim, int wtid, Op op) {
  TiledMma mma;
  Tensor c = mma.get_thread_slice(wtid).partition_C(make_identity_tensor(Shape<_64, Int<kHeadDim>>{}));
  static_assert(decltype(size(c))::value == decltype(size(acc))::value, "accumulator and coordinates");
  CUTE_UNROLL
  for (int i = 0; i < size(acc); i += 2) {
    const int row = static_cast<int>(get<0>(c(i))), col = static_cast<int>(get<1>(c(i)));
    if (row < valid_rows && col < head_dim)
      op(dst + int64_t(row) * row_stride + col, acc(i) * scale, acc(i + 1) * scale);
  }
}

template <typename Element>
CUTE_DEVICE void store_pair(Element* dst, float a, float b) {
  using Pair = cutlass::Array<Element, 2>;
  Pair v;
  v[0] = Element(a);
  v[1] = Element(b);
  *reinterpret_cast<Pair*>(dst) = v;
}

// dK · scale and dV of warpgroup wg's 64 keys of key block n_block (acc_dk, acc_dv: TiledMmadKV
// fragments of (64, HDIM)); at D 256 of the block's 64 keys and the warpgroup's half of the head
// dim, (64, HDIM / 2) at column HDIM / 2 · wg. seqlen_k: the call's key length (the workspace's rows
// per sequence).
// kDeterministic: the GQA mode is kPartial (kernel_args.cpp), else kAtomic; a template flag so
// that the default kernel carries no kPartial branch.
template <typename Traits, bool kDeterministic, typename Acc>
CUTE_DEVICE void store_dkv(Acc const& acc_dk, Acc const& acc_dv, const common::BwdGradArgs& g,
                           const common::WorkTile& t, int n_block, int wg, int wtid, float softmax_scale,
                           int kv_group, int seqlen_k, int head_dim) {
  using Element = typename Traits::Element;
  using Mma = typename Traits::TiledMmadKV;
  constexpr int kD = Traits::kDkvCols;
  const int64_t n0 = int64_t(n_block) * Traits::kBlockN + (Traits::kWide ? 0 : int64_t(wg) * Traits::kKeysPerWarpGroup);
  const int rows = t.k_len - static_cast<int>(n0);
  if (rows <= 0) return;
  const int c0 = Traits::kWide ? wg * kD : 0;  // the first column of the fragments
  const int cols = head_dim - c0;  // the fragments' columns < cols are the head's
  const int kv_head = t.head / kv_group;
  if (g.dkv_mode == common::DkvMode::kDirect) {
    Element* dk = static_cast<Element*>(g.dk) +
                  t.k_offset(g.dk_batch_stride, g.dk_row_stride, g.dk_head_stride, n0, kv_head) + c0;
    Element* dv = static_cast<Element*>(g.dv) +
                  t.k_offset(g.dv_batch_stride, g.dv_row_stride, g.dv_head_stride, n0, kv_head) + c0;
    write_pairs<Mma, kD>(acc_dk, softmax_scale, dk, g.dk_row_stride, rows, cols, wtid,
                         store_pair<Element>);
    write_pairs<Mma, kD>(acc_dv, 1.0f, dv, g.dv_row_stride, rows, cols, wtid, store_pair<Element>);
    return;
  }
  const int64_t row_stride = int64_t(g.heads_acc) * head_dim;
  if constexpr (kDeterministic) {
    // kPartial (GQA, deterministic): the query head's own fp32 slice of (rows_k, heads_q,
    // head_dim), plain stores (this CTA is its only writer); summed in head order afterwards.
    const int64_t off = t.k_offset(int64_t(seqlen_k) * row_stride, row_stride, head_dim, n0, t.head);
    auto store = [](float* dst, float a, float b) { *reinterpret_cast<float2*>(dst) = make_float2(a, b); };
    write_pairs<Mma, kD>(acc_dk, softmax_scale, g.dk_accum + off + c0, row_stride, rows, cols, wtid, store);
    write_pairs<Mma, kD>(acc_dv, 1.0f, g.dv_accum + off + c0, row_stride, rows, cols, wtid, store);
    return;
  }
  // kAtomic (GQA): the kv head's fp32 slice of (rows_k, heads_acc, head_dim).
  const int64_t off = t.k_offset(int64_t(seqlen_k) * row_stride, row_stride, head_dim, n0, kv_head);
  auto add = [](float* dst, float a, float b) {
    atomicAdd(dst, a);
    atomicAdd(dst + 1, b);
  };
  write_pairs<Mma, kD>(acc_dk, softmax_scale, g.dk_accum + off + c0, row_stride, rows, cols, wtid, add);
  write_pairs<Mma, kD>(acc_dv, 1.0f, g.dv_accum + off + c0, row_stride, rows, cols, wtid, add);
}

// dQ = scale · dq_accum -> the dtype output. Grid (query blocks of kBlockM, heads_q, batch), one
// warpgroup per tile: thread t reads back, slab by slab, exactly the values store_dq_smem's thread t
// stored (whole 512-byte lines per warp), converts them into a row-major slab in shared memory,
// and the warpgroup then writes whole 16-byte row chunks (straight from the fragment, a warp's
// 4-byte stores touched 8 rows each: 1.9 TB/s at b32 s512 h16 d128 on the H100).
template <typename Traits>
struct BwdConvertDq {
  static constexpr int kThreads = cutlass::NumThreadsPerWarpGroup;
  static constexpr int kHeadDim = Traits::kHeadDim;
  using Element = typename Traits::Element;
  static constexpr int kCols = Traits::kDqCols;
  // +8 elements a row: consecutive rows 4 banks apart, so a warp's pair stores (8 rows × 4 pairs)
  // hit 32 different banks; rows stay 16-byte aligned.
  static constexpr int kPitch = kCols + 8;
  struct SharedStorage {
    alignas(16) Element slab[Traits::kBlockM * kPitch];
  };
  static constexpr int kSharedStorageBytes = int(sizeof(SharedStorage));
  struct Params {
    common::SeqArgs seq;
    common::BwdGradArgs grad;
    float softmax_scale;
    int head_dim;
  };
  static Params to_params(const common::BwdArguments& a) {
    return Params{a.seq, a.grad, a.score.softmax_scale, a.in.head_dim};
  }
  static dim3 grid(const Params& p) { return common::FwdTileScheduler::grid(p.seq, Traits::kBlockM); }

  CUTE_DEVICE void operator()(const Params& p, SharedStorage& smem) const {
    const common::WorkTile t = common::FwdTileScheduler::get_tile(p.seq);
    if (t.m_block * Traits::kBlockM >= t.q_len) return;
    const int wtid = static_cast<int>(threadIdx.x);
    typename Traits::TiledMmadQ mma;
    const common::BwdGradArgs& g = p.grad;
    const int64_t m0 = int64_t(t.m_block) * Traits::kBlockM;
    const int rows = t.q_len - static_cast<int>(m0);
    Element* dq = static_cast<Element*>(g.dq) +
                  t.q_offset(g.dq_batch_stride, g.dq_row_stride, g.dq_head_stride, m0, t.head);
    const float* tile = dq_accum_tile<Traits>(g, t, t.m_block, p.seq.seqlen_q, p.seq.heads_q);
    Tensor c = mma.get_thread_slice(wtid).partition_C(make_identity_tensor(Shape<Int<Traits::kBlockM>, Int<kCols>>{}));
    CUTE_UNROLL
    for (int h = 0; h < Traits::kDqSlabs; ++h) {
      const int cols = p.head_dim - h * kCols;  // the slab's columns that exist (multiples of 8)
      if (cols <= 0) break;
      Tensor acc = partition_fragment_C(mma, Shape<Int<Traits::kBlockM>, Int<kCols>>{});  // ((2, 2, COLS/8), 1, 1)
      const float* slab = tile + h * (Traits::kBlockM * kCols);
      // Bucket 192 on the D 256 layout: slab 1 is stored up to its first half (fragment values
      // [0, N/2), DqAccumOrder's first half); the rest is zero.
      constexpr int kSize = decltype(size(acc))::value;
      constexpr int kStored = Traits::kDqTileDropsLastHalfSlab ? kSize / 2 : kSize;
      clear(acc);
      CUTE_UNROLL
      for (int i = 0; i < size(acc); i += DqAccumOrder::kVec) {
        if (h == 1 && i >= kStored) break;
        const float4 v = *reinterpret_cast<const float4*>(slab + DqAccumOrder::index(i, wtid));
        acc(i) = v.x, acc(i + 1) = v.y, acc(i + 2) = v.z, acc(i + 3) = v.w;
      }
      if (h > 0) __syncthreads();  // the previous slab's chunks were read
      CUTE_UNROLL
      for (int i = 0; i < size(acc); i += 2) {  // values i, i + 1: adjacent columns of one row
        const int row = static_cast<int>(get<0>(c(i))), col = static_cast<int>(get<1>(c(i)));
        store_pair(smem.slab + row * kPitch + col, acc(i) * p.softmax_scale, acc(i + 1) * p.softmax_scale);
      }
      __syncthreads();
      constexpr int kChunks = kCols / 8;  // 16-byte chunks per row
      CUTE_UNROLL
      for (int j = wtid; j < Traits::kBlockM * kChunks; j += kThreads) {
        const int row = j / kChunks, col = (j % kChunks) * 8;
        if (row < rows && col < cols)
          *reinterpret_cast<uint4*>(dq + int64_t(row) * g.dq_row_stride + h * kCols + col) =
              *reinterpret_cast<const uint4*>(smem.slab + row * kPitch + col);
      }
    }
  }
};

}  // namespace sm90
}  // namespace flashlab
