// src/cuda/common/bwd_prepost.h — the small kernels before and after the backward's main kernel.
//
//   bwd_preprocess_kernel   D_i = rowsum(dO_i ∘ O_i) in fp32 -> workspace dsum (FlashAttention-2's
//                           "dot(dO, O)"; O is the forward's output, dropout scaling included);
//                           with BwdRowArgs::row_stats_block, D and LSE · log2(e) -> the
//                           tiles of row_stats instead, padding rows included (cuda_sm90)
//                           with attention sinks, each CTA also writes its rows' share of
//                           dsink_h = −Σ_rows exp(sink_h − LSE)·D to the workspace (dsink_part)
//   bwd_dsink_kernel        dsink_h = the sum of head h's partials, in a fixed order (so the
//                           deterministic mode needs nothing more)
//   bwd_convert_dkv_kernel  GQA: dK, dV = the fp32 workspace slices -> the dtype outputs; in
//                           deterministic mode the group's query-head slices are summed in head
//                           order, so the result does not depend on which CTA finished first.
// bwd_prologue / bwd_epilogue_dkv launch them (host), with the workspace zeroing, around any
// implementation's main kernels. Both are memory-bound row sweeps, 8 elements (16 bytes of the dtype) per
// lane: the preprocess gives a row row_lanes(head_dim) lanes (a warp sums 2 rows at once at head dim 128),
// the dK / dV conversion a warp per row. Grid (row blocks of kPrepostRows, head, sequence); rows past a
// (varlen) sequence are neither read nor written.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include <cutlass/numeric_types.h>

#include "cuda/common/bwd_workspace.h"
#include "cuda/common/kernel_args.h"
#include "cuda/common/launch.h"
#include "cuda/common/math.h"  // kLog2e

namespace flashlab {
namespace common {

constexpr int kPrepostRows = 64;      // rows per CTA
constexpr int kPrepostThreads = 128;  // 4 warps, one row each at a time

// Rows [begin, begin + len) of sequence b in a packed (varlen) or batched tensor, and `base`, the
// workspace row of its first row (packed row, or b · seqlen for fixed lengths).
struct SeqRows {
  int64_t base = 0;
  int len = 0;
  bool varlen = false;
  int b = 0;
  __device__ SeqRows(const int32_t* cu_seqlens, int seqlen, int batch) : b(batch) {
    varlen = cu_seqlens != nullptr;
    if (varlen) {
      base = cu_seqlens[b];
      len = static_cast<int>(cu_seqlens[b + 1] - base);
    } else {
      base = int64_t(b) * seqlen;
      len = seqlen;
    }
  }
  // Element offset of (row, head) in a tensor with these strides.
  __device__ int64_t offset(int64_t batch_stride, int64_t row_stride, int64_t head_stride, int row,
                            int head) const {
    const int64_t r = varlen ? (base + row) * row_stride : b * batch_stride + int64_t(row) * row_stride;
    return r + int64_t(head) * head_stride;
  }
};

template <typename Element>
struct Pack8 {  // 8 dtype values: one 16-byte load or store
  uint4 raw;
  __device__ float get(int i) const { return float(reinterpret_cast<const Element*>(&raw)[i]); }
  __device__ void set(int i, float v) { reinterpret_cast<Element*>(&raw)[i] = Element(v); }
};

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
// The sum over aligned groups of `lanes` lanes (a power of two <= 32), in every lane of the group.
__device__ __forceinline__ float group_sum(float x, int lanes) {
  for (int o = lanes / 2; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
// Lanes per row of a row sweep: 8 elements (16 bytes of a 16-bit dtype) a lane, rounded up to a
// power of two, so that a warp holds whole rows.
__host__ __device__ constexpr int row_lanes(int head_dim) {
  int lanes = 1;
  while (lanes < 32 && 8 * lanes < head_dim) lanes *= 2;
  return lanes;
}

// zero / zero_count: dq_accum and its length in float4 (0: nothing to zero). The CTAs zero it
// between them, each a contiguous share, while they stream O and dO: one pass over memory instead
// of a cudaMemsetAsync before the kernel (its launch, ~14 us of host time, and a second sweep).
template <typename Element, typename Params>
__global__ void __launch_bounds__(kPrepostThreads, 8)  // <= 64 registers: 8 CTAs (32 warps) an SM
    bwd_preprocess_kernel(__grid_constant__ const Params params, float4* zero, int64_t zero_count) {
  if (zero_count > 0) {
    const int64_t ctas = int64_t(gridDim.x) * gridDim.y * gridDim.z;
    const int64_t cta = blockIdx.x + int64_t(gridDim.x) * (blockIdx.y + int64_t(gridDim.y) * blockIdx.z);
    const int64_t share = (zero_count + ctas - 1) / ctas;
    const int64_t end = min(zero_count, (cta + 1) * share);
    for (int64_t i = cta * share + threadIdx.x; i < end; i += kPrepostThreads) zero[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  const BwdInputArgs& in = params.in;
  const SeqRows s(params.seq.cu_seqlens_q, params.seq.seqlen_q, static_cast<int>(blockIdx.z));
  const int head = static_cast<int>(blockIdx.y);
  const int m0 = static_cast<int>(blockIdx.x) * kPrepostRows;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  // A row takes `lanes` lanes (16 bytes of the dtype each: head_dim / 8 rounded up to a power of
  // two), so a warp covers 32 / lanes rows at once: at head dim 128 two rows, at 64 four. One row
  // per warp left half or more of the lanes idle below head dim 256.
  const int lanes = row_lanes(in.head_dim);
  const int sub = lane / lanes, d0 = 8 * (lane % lanes);
  const bool row_leader = lane % lanes == 0;
  const BwdRowArgs& rows = params.rows;
  // row_stats tiles of block rows (a multiple of kPrepostRows: bwd_prologue): this CTA writes rows
  // [m0 % block, + kPrepostRows) of tile m0 / block. CTAs past the sequences' longest length exist
  // only for those tiles' padding rows.
  const int block = rows.row_stats_block;
  static_assert(kPrepostRows == kDsinkBlockRows, "one CTA writes one dsink partial");
  // Attention sinks: the gradient of the sink logit s is −Σ_rows P_sink·D with P_sink = e^(s − LSE)
  // (the sink adds no value, so dS of the keys is unchanged). Each row's leading lane sums its rows;
  // the warp's lanes are summed after the loop.
  const float sink = rows.dsink_partial != nullptr ? params.score.sink_logits[head] : -INFINITY;
  const bool needs_lse = sink != -INFINITY || block > 0;
  float sink_part = 0.0f;
  // Tiles: every row of the block, the padding past the sequence too.
  const int r_end = block > 0 ? m0 + kPrepostRows : min(m0 + kPrepostRows, s.len);
  // What a row's leading lane does with its D (summed over the row's lanes) and LSE: the sink's
  // share, and D (and LSE · log2 e) out.
  auto finish = [&](int r, float sum, float lse) {
    const bool in_seq = r < s.len;
    if (sink != -INFINITY && in_seq) sink_part -= exp2f((sink - lse) * kLog2e) * sum;  // exp2f: expf's slow path spills
    if (block == 0) {
      rows.dsum[int64_t(head) * rows.rows_q + s.offset(params.seq.seqlen_q, 1, 0, r, 0)] = sum;
      return;
    }
    // Past the sequence, or no visible key: +inf, so that P = 0.
    const float lse_log2 = in_seq && lse != -INFINITY ? lse * kLog2e : INFINITY;
    float* tile =
        rows.row_stats + row_stats_tile_offset(s.b, m0 / block, head, params.seq.seqlen_q, params.seq.heads_q, block);
    tile[r % block] = lse_log2;
    tile[block + r % block] = sum;
  };
  // A warp takes kBatch of its row slots at once: their O, dO and LSE loads are all in flight
  // before the first product. (The LSE was read inside finish(), after the sum: a dependent load
  // per row, serialized behind the row_stats stores; ncu had this kernel at ~60 % of DRAM peak.)
  constexpr int kWarps = kPrepostThreads / 32, kBatch = 4;
  const int rows_per_warp = 32 / lanes, slot_stride = kWarps * rows_per_warp;
  for (int r0 = m0 + warp * rows_per_warp; r0 < r_end; r0 += kBatch * slot_stride) {  // warp-uniform
    Pack8<Element> o[kBatch], d[kBatch];
    float lse[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int r = r0 + u * slot_stride + sub;
      o[u].raw = d[u].raw = make_uint4(0u, 0u, 0u, 0u);
      lse[u] = -INFINITY;
      if (r < r_end && r < s.len) {
        if (d0 < in.head_dim) {
          o[u].raw = *reinterpret_cast<const uint4*>(
              static_cast<const Element*>(in.out) +
              s.offset(in.o_batch_stride, in.o_row_stride, in.o_head_stride, r, head) + d0);
          d[u].raw = *reinterpret_cast<const uint4*>(
              static_cast<const Element*>(in.dout) +
              s.offset(in.do_batch_stride, in.do_row_stride, in.do_head_stride, r, head) + d0);
        }
        if (needs_lse && row_leader)
          lse[u] = rows.lse[s.varlen ? int64_t(head) * rows.lse_head_stride + s.base + r
                                     : int64_t(s.b) * rows.lse_batch_stride + int64_t(head) * rows.lse_head_stride + r];
      }
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int r = r0 + u * slot_stride + sub;
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < 8; ++i) sum += o[u].get(i) * d[u].get(i);
      sum = group_sum(sum, lanes);
      if (row_leader && r < r_end) finish(r, sum, lse[u]);
    }
  }
  if (rows.dsink_partial != nullptr) sink_part = warp_sum(sink_part);  // the row leaders' sums (others hold 0)
  // CTA-uniform: the four warps' sums in warp order; the padding CTAs have no partial.
  if (rows.dsink_partial != nullptr && m0 < params.seq.seqlen_q) {
    __shared__ float warp_part[kPrepostThreads / 32];
    if (lane == 0) warp_part[warp] = sink_part;
    __syncthreads();
    if (threadIdx.x == 0) {
      float total = 0.0f;
#pragma unroll
      for (int w = 0; w < kPrepostThreads / 32; ++w) total += warp_part[w];
      rows.dsink_partial[dsink_partial_index(s.b, static_cast<int>(blockIdx.x), head, params.seq.seqlen_q,
                                             params.seq.heads_q)] = total;
    }
  }
}

// dsink[h] = Σ of head h's partials (one CTA per head): each thread sums a fixed strided subset,
// then a fixed tree; the result does not depend on scheduling.
constexpr int kDsinkThreads = 256;
template <int kThreads = kDsinkThreads>  // a template: this header is compiled into several translation units
__global__ void __launch_bounds__(kThreads)
    bwd_dsink_kernel(const float* __restrict__ partial, int64_t n, int heads_q, float* __restrict__ dsink) {
  static_assert(kThreads == kDsinkThreads, "the tree below halves kDsinkThreads");
  const int h = static_cast<int>(blockIdx.x), t = static_cast<int>(threadIdx.x);
  float acc = 0.0f;
  for (int64_t i = t; i < n; i += kDsinkThreads) acc += partial[i * heads_q + h];
  __shared__ float red[kDsinkThreads];
  red[t] = acc;
  __syncthreads();
#pragma unroll
  for (int w = kDsinkThreads / 2; w > 0; w >>= 1) {
    if (t < w) red[t] += red[t + w];
    __syncthreads();
  }
  if (t == 0) dsink[h] = red[0];
}

// Grid (row blocks of seqlen_k, heads_kv, batch).
template <typename Element, typename Params>
__global__ void __launch_bounds__(kPrepostThreads)
    bwd_convert_dkv_kernel(__grid_constant__ const Params params) {
  const BwdGradArgs& g = params.grad;
  const int hd = params.in.head_dim;
  const SeqRows s(params.seq.cu_seqlens_k, params.seq.seqlen_k, static_cast<int>(blockIdx.z));
  const int kv_head = static_cast<int>(blockIdx.y);
  const int n0 = static_cast<int>(blockIdx.x) * kPrepostRows;
  // A row on row_lanes(hd) lanes, as the preprocess: several rows a warp below head dim 256.
  const int lane = static_cast<int>(threadIdx.x) % 32, lanes = row_lanes(hd);
  const int slot = static_cast<int>(threadIdx.x) / lanes;  // the thread's row slot in the CTA
  const int d0 = 8 * (lane % lanes);
  if (d0 >= hd) return;  // no shuffles below: idle lanes may leave
  const int64_t accum_row = int64_t(g.heads_acc) * hd;
  // kAtomic: one slice, the kv head's. kPartial: the group's query heads, summed in order.
  const int first = g.dkv_mode == DkvMode::kAtomic ? kv_head : kv_head * params.in.kv_group;
  const int count = g.dkv_mode == DkvMode::kAtomic ? 1 : params.in.kv_group;
  for (int r = n0 + slot; r < n0 + kPrepostRows && r < s.len; r += kPrepostThreads / lanes) {
    float dk[8] = {}, dv[8] = {};
    for (int h = first; h < first + count; ++h) {
      const int64_t off = s.offset(params.seq.seqlen_k * accum_row, accum_row, hd, r, h) + d0;
      const float4* pk = reinterpret_cast<const float4*>(g.dk_accum + off);
      const float4* pv = reinterpret_cast<const float4*>(g.dv_accum + off);
      const float4 k0 = pk[0], k1 = pk[1], v0 = pv[0], v1 = pv[1];
      dk[0] += k0.x, dk[1] += k0.y, dk[2] += k0.z, dk[3] += k0.w;
      dk[4] += k1.x, dk[5] += k1.y, dk[6] += k1.z, dk[7] += k1.w;
      dv[0] += v0.x, dv[1] += v0.y, dv[2] += v0.z, dv[3] += v0.w;
      dv[4] += v1.x, dv[5] += v1.y, dv[6] += v1.z, dv[7] += v1.w;
    }
    Pack8<Element> ok, ov;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      ok.set(i, dk[i]);
      ov.set(i, dv[i]);
    }
    *reinterpret_cast<uint4*>(static_cast<Element*>(g.dk) +
                              s.offset(g.dk_batch_stride, g.dk_row_stride, g.dk_head_stride, r, kv_head) +
                              d0) = ok.raw;
    *reinterpret_cast<uint4*>(static_cast<Element*>(g.dv) +
                              s.offset(g.dv_batch_stride, g.dv_row_stride, g.dv_head_stride, r, kv_head) +
                              d0) = ov.raw;
  }
}

// ---- Host: what every implementation's backward runs around its own kernels, in stream order.
// Before: zero the tiles' semaphores (cuda_sm90's deterministic mode) and, GQA with atomics,
// dk_accum / dv_accum; then D = rowsum(dO ∘ O) in the kernel that also zeroes dq_accum's tiles
// (atomic dQ; tiles of block_m rows × the bucket).
template <typename Element>
Status bwd_prologue(const BwdArguments& args, int block_m, int bucket, cudaStream_t stream,
                    const char* impl) {
  const SeqArgs& seq = args.seq;
  const BwdGradArgs& g = args.grad;
  // 64-row CTAs; with row_stats tiles, enough of them to fill the last tile's padding rows too.
  // (row_stats_block: 0, or a multiple of kPrepostRows dividing kDqAccumRowAlign: sm90/bwd_launch.h.)
  const int stats_block = args.rows.row_stats_block;
  const int row_blocks = (seq.seqlen_q + kPrepostRows - 1) / kPrepostRows;  // the dsink partials' count
  const int cta_rows = stats_block > 0 ? (seq.seqlen_q + stats_block - 1) / stats_block * (stats_block / kPrepostRows)
                                       : row_blocks;
  const dim3 grid_rows_q(cta_rows, seq.heads_q, seq.batch);
  // dq_accum is zeroed by the preprocess kernel (below); with no rows it has no tile either.
  const int64_t dq_accum_count4 =
      g.dq_accum != nullptr && nonempty(grid_rows_q)
          ? dq_accum_floats(seq.batch, seq.seqlen_q, seq.heads_q, block_m, bucket) / 4  // 256-byte tiles
          : 0;
  if (g.dq_semaphore != nullptr) {
    const size_t bytes =
        size_t(dq_semaphore_count(seq.batch, seq.seqlen_q, seq.heads_q, block_m)) * sizeof(int);
    FLASHLAB_RETURN_IF_ERROR(
        cuda_error(cudaMemsetAsync(g.dq_semaphore, 0, bytes, stream), impl, "cudaMemsetAsync(dq_semaphore)"));
  }
  if (g.dkv_mode == DkvMode::kAtomic) {
    const size_t bytes = size_t(g.rows_k) * size_t(g.heads_acc) * size_t(args.in.head_dim) * sizeof(float);
    FLASHLAB_RETURN_IF_ERROR(
        cuda_error(cudaMemsetAsync(g.dk_accum, 0, bytes, stream), impl, "cudaMemsetAsync(dk_accum)"));
    FLASHLAB_RETURN_IF_ERROR(
        cuda_error(cudaMemsetAsync(g.dv_accum, 0, bytes, stream), impl, "cudaMemsetAsync(dv_accum)"));
  }
  if (nonempty(grid_rows_q)) {
    bwd_preprocess_kernel<Element><<<grid_rows_q, kPrepostThreads, 0, stream>>>(
        args, reinterpret_cast<float4*>(g.dq_accum), dq_accum_count4);
    FLASHLAB_RETURN_IF_ERROR(cuda_error(cudaGetLastError(), impl, "backward preprocess kernel launch"));
  }
  if (args.rows.dsink != nullptr && seq.heads_q > 0) {
    // No rows (an empty batch or seqlen_q 0): no partials, dsink = 0.
    const int64_t n = nonempty(grid_rows_q) ? int64_t(row_blocks) * seq.batch : 0;
    bwd_dsink_kernel<><<<seq.heads_q, kDsinkThreads, 0, stream>>>(args.rows.dsink_partial, n, seq.heads_q,
                                                               args.rows.dsink);
    FLASHLAB_RETURN_IF_ERROR(cuda_error(cudaGetLastError(), impl, "backward dsink kernel launch"));
  }
  return Status::Ok();
}

// After: GQA (dK / dV in fp32 workspace slices) -> the dtype outputs.
template <typename Element>
Status bwd_epilogue_dkv(const BwdArguments& args, cudaStream_t stream, const char* impl) {
  const BwdGradArgs& g = args.grad;
  if (g.dkv_mode == DkvMode::kDirect) return Status::Ok();
  const dim3 grid_rows_k((args.seq.seqlen_k + kPrepostRows - 1) / kPrepostRows, g.heads_kv, args.seq.batch);
  if (!nonempty(grid_rows_k)) return Status::Ok();
  bwd_convert_dkv_kernel<Element><<<grid_rows_k, kPrepostThreads, 0, stream>>>(args);
  return cuda_error(cudaGetLastError(), impl, "backward dK/dV conversion kernel launch");
}

}  // namespace common
}  // namespace flashlab
