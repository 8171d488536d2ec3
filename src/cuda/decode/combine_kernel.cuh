// src/cuda/decode/combine_kernel.cuh — the LSE-exact merge of split partials (docs/kvcache.md,
// "Split-KV and the combine"), used twice: after the decode kernels' splits (decode.cu) and by the
// public attention_combine on CUDA (kvcache_ops.cu).
//
//   m = max(sink, max_s lse_s);  w_s = exp(lse_s − m);  l = exp(sink − m) + Σ_s w_s
//   out = Σ_s w_s O_s / l;       lse = m + log l
// Splits with lse_s = −inf add nothing; every split −inf and no sink: out 0, lse −inf. The attention
// sink (one logit per head, or none) is one more "split" with O = 0, so where the sink enters —
// here after splits, or in merge_and_store without them — does not change the math.
//
// One CTA per output row (b, i, h); thread e owns columns e, e + blockDim, ...; each split's
// partial row is read as consecutive fp32 (coalesced). The arithmetic per element (fmaf over the
// splits in order, then one multiply by 1 / l) is the order decode_combine_kernel used before it
// became this kernel, so the decode results did not change.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/common/ptx_sm80.cuh"

namespace flashlab {
namespace decode {

struct CombineArgs {
  int num_splits = 0, batch = 0, seqlen_q = 0, heads = 0, head_dim = 0;
  // (num_splits, batch, seqlen_q, heads, head_dim) fp32, last dimension contiguous
  const float* o_partial = nullptr;
  int64_t o_split_stride = 0, o_batch_stride = 0, o_row_stride = 0, o_head_stride = 0;
  // (num_splits, batch, heads, seqlen_q) fp32, rows contiguous
  const float* lse_partial = nullptr;
  int64_t l_split_stride = 0, l_batch_stride = 0, l_head_stride = 0;
  // (batch, seqlen_q, heads, head_dim) in T; lse (batch, heads, seqlen_q) fp32 or null
  void* out = nullptr;
  int64_t out_batch_stride = 0, out_row_stride = 0, out_head_stride = 0;
  float* lse = nullptr;
  int64_t lse_batch_stride = 0, lse_head_stride = 0;
  const float* sink_logits = nullptr;  // (heads) or null
};

template <typename T>
__device__ __forceinline__ T store_as(float x);
template <>
__device__ __forceinline__ float store_as(float x) { return x; }
template <>
__device__ __forceinline__ __half store_as(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 store_as(float x) { return __float2bfloat16_rn(x); }

template <typename T>
__global__ void __launch_bounds__(128) combine_kernel(const __grid_constant__ CombineArgs a) {
  constexpr float kLog2e = 1.4426950408889634f;
  // Launched as the decode kernel's dependent (decode.cu): nothing is read before its partials are.
  ptx::grid_dependency_wait();
  const int h = blockIdx.x % a.heads;
  const int i = (blockIdx.x / a.heads) % a.seqlen_q;
  const int b = blockIdx.x / (a.heads * a.seqlen_q);
  const float* lse_row = a.lse_partial + b * a.l_batch_stride + int64_t(h) * a.l_head_stride + i;
  const float* o_row = a.o_partial + b * a.o_batch_stride + int64_t(i) * a.o_row_stride + int64_t(h) * a.o_head_stride;
  const float sink = a.sink_logits != nullptr ? a.sink_logits[h] : -INFINITY;
  float mx = sink;
  bool nan_in = false;  // a NaN partial (a refused sequence's, or the caller's) makes the row NaN
  for (int s = 0; s < a.num_splits; ++s) {
    const float ls = lse_row[s * a.l_split_stride];
    mx = fmaxf(mx, ls);  // fmaxf drops NaN: nan_in keeps it
    nan_in |= ls != ls;
  }
  // The weights' sum (the same in every thread; cheap next to the head_dim-wide reads below).
  float sum = 0.0f;
  if (mx != -INFINITY) {
    for (int s = 0; s < a.num_splits; ++s) {
      const float ls = lse_row[s * a.l_split_stride];
      if (ls != -INFINITY) sum += exp2f((ls - mx) * kLog2e);
    }
    if (sink != -INFINITY) sum += exp2f((sink - mx) * kLog2e);
  }
  const float nan = __int_as_float(0x7fc00000);
  const float inv = nan_in ? nan : sum > 0.0f ? 1.0f / sum : 0.0f;
  T* out = static_cast<T*>(a.out) + b * a.out_batch_stride + int64_t(i) * a.out_row_stride + int64_t(h) * a.out_head_stride;
  for (int e = threadIdx.x; e < a.head_dim; e += blockDim.x) {
    float acc = 0.0f;
    if (mx != -INFINITY) {
      for (int s = 0; s < a.num_splits; ++s) {
        const float ls = lse_row[s * a.l_split_stride];
        if (ls == -INFINITY) continue;
        acc = fmaf(exp2f((ls - mx) * kLog2e), o_row[s * a.o_split_stride + e], acc);
      }
    }
    out[e] = store_as<T>(acc * inv);
  }
  if (a.lse != nullptr && threadIdx.x == 0)
    a.lse[b * a.lse_batch_stride + int64_t(h) * a.lse_head_stride + i] =
        nan_in ? nan : sum > 0.0f ? mx + logf(sum) : -INFINITY;
}

}  // namespace decode
}  // namespace flashlab
