// flashlab/kvcache.h — inference: attention against a K/V cache (issue 14), and the split-KV
// combine. Semantics in docs/kvcache.md. Entry points are declared in flashlab.h.
//
// Queries q: (batch, seqlen_q, heads_q, head_dim), seqlen_q >= 1 (decode 1; speculative or chunked
// prefill > 1). The cache holds, for sequence b, physical slots 0 .. capacity-1 per kv head:
//   contiguous: k_cache/v_cache (batch_cache, max_seqlen_cache, heads_kv, head_dim); sequence b
//               uses cache row cache_batch_idx[b] (or b when cache_batch_idx is null).
//   paged:      k_cache/v_cache are pages; batch_stride is the page stride, row_stride the slot
//               stride, head_stride the head stride (NHD: (page, page_size, heads_kv, head_dim);
//               HND: (page, heads_kv, page_size, head_dim); paged_cache() fills them). Slot s of
//               sequence b is slot s % page_size of page block_table[b][s / page_size].
// The keys of sequence b are slots [leftpad[b], cache_seqlens[b] + seqlen_new): first the cached
// ones, then the new k/v appended in place at slots cache_seqlens[b] .. + seqlen_new - 1. Their
// count L_b = cache_seqlens[b] + seqlen_new - leftpad[b] is the ATTENDED LENGTH; key j (0-based
// among them) has position j, query i has position L_b - seqlen_q + i (the causal diagonal and
// the rotary positions both use these). Slots outside the keys are never read.
#pragma once

#include <cstdint>

#include "flashlab/params.h"

namespace flashlab {

enum class KvLayout : int {
  kNHD = 0,  // (page, page_size, heads_kv, head_dim)
  kHND = 1,  // (page, heads_kv, page_size, head_dim)
};

enum class RotaryStyle : int {
  kInterleaved = 0,  // GPT-J: rotates pairs (2i, 2i+1)
  kNeoX = 1,         // GPT-NeoX / Llama: rotates pairs (i, i + rotary_dim/2)
};

// AttentionConfig's fields keep their meaning: dtype (of q and out; cache_dtype must match),
// device, impl, batch, seqlen_q, heads_q, heads_kv, head_dim, softmax_scale, softcap, ALiBi,
// causal (always bottom-right against the attended length: causal_align must be kBottomRight),
// window, sink_tokens (the first sink_tokens keys after cache_leftpad; every impl: on CUDA one more
// split), num_threads, stream, workspace. Unused here: seqlen_k (set from the cache), dropout
// (must be 0), cu_seqlens (must be null).
struct KvCacheParams : AttentionConfig {
  TensorRef q;  // (batch, seqlen_q, heads_q, head_dim); unused by kvcache_append
  MutTensorRef out;  // (batch, seqlen_q, heads_q, head_dim); unused by kvcache_append
  float* lse = nullptr;  // (batch, heads_q, seqlen_q) fp32, rows contiguous; may be null
  int64_t lse_batch_stride = 0;
  int64_t lse_head_stride = 0;

  // --- the cache (written in place when k_new/v_new are given)
  MutTensorRef k_cache, v_cache;
  // Element type of k_cache, v_cache, k_new and v_new, so a binding passes what it holds and gets
  // an error instead of reinterpreted bytes. Must equal dtype for now (no fp8 or mixed caches).
  DType cache_dtype = DType::kBFloat16;  // the same default as dtype
  // contiguous cache (block_table null)
  int64_t batch_cache = 0;       // rows of the cache; 0 = batch
  int64_t max_seqlen_cache = 0;  // slots per row (the capacity)
  const int32_t* cache_batch_idx = nullptr;  // (batch): cache row of each sequence; null = b
  // paged cache (block_table set)
  const int32_t* block_table = nullptr;  // (batch, max_pages) int32 page indices
  int64_t block_table_batch_stride = 0;  // 0 = max_pages
  int64_t max_pages = 0;                 // pages per sequence: capacity = max_pages * page_size
  int64_t num_pages = 0;                 // pages in k_cache/v_cache: entries must be in [0, num_pages)
  int64_t page_size = 0;                 // slots per page, any >= 1
  KvLayout page_layout = KvLayout::kNHD;  // must match the strides' order (checked when both > 1)

  const int32_t* cache_seqlens = nullptr;  // (batch) int32: filled slots before the append (required)
  const int32_t* cache_leftpad = nullptr;  // (batch) int32 or null: slots [0, leftpad) are not keys

  // --- optional new keys/values, both or neither: (batch, seqlen_new, heads_kv, head_dim)
  TensorRef k_new, v_new;
  int64_t seqlen_new = 0;

  // --- optional rotary embedding: cos/sin (rotary_max_pos, rotary_dim/2) in rotary_dtype (fp32,
  // bf16 or fp16: a 16-bit table is used as its exact fp32 values), rows contiguous. Applied to the
  // new keys (before they are stored) and to the queries (not written back), at their positions
  // (see above); dims >= rotary_dim pass through. Rotated values are rounded to dtype, as a kernel
  // storing them would.
  const void* rotary_cos = nullptr;
  const void* rotary_sin = nullptr;
  DType rotary_dtype = DType::kFloat32;
  int64_t rotary_dim = 0;  // even, 2 .. head_dim; 0 = off
  int64_t rotary_max_pos = 0;
  RotaryStyle rotary_style = RotaryStyle::kNeoX;

  // --- split-KV: the attended keys are cut into splits, each gives a partial (O, LSE), merged as
  // attention_combine does. split_size > 0: splits of exactly split_size keys (the last shorter),
  // so a sequence's result does not depend on the batch it is in. Otherwise num_splits: 0 = auto,
  // 1 = none, n = n splits of ceil(L / n) keys. Set at most one of them.
  int num_splits = 0;
  int64_t split_size = 0;

  // --- device data checks (CUDA). On the CPU cache_seqlens, leftpad, cache_batch_idx and
  // block_table are always checked entry by entry before anything is written. On CUDA they live on
  // the device, and a decode step must not synchronize (nor can it inside CUDA-graph capture), so
  // by default they are not read on the host: the kernels then never write outside the cache (a
  // sequence whose append does not fit, or whose page entry is out of range, writes nothing; its
  // queries' rotary positions out of range give NaN outputs) but read whatever a bad entry names.
  // true: copy them to the host first (synchronizing `stream`) and apply the CPU's checks, so
  // bad data is a Status error with nothing written.
  bool check_device_data = false;
};

// Strides of a contiguous cache (rows, seqlen, heads, head_dim) or of pages in `layout`.
inline MutTensorRef paged_cache(void* p, KvLayout layout, int64_t page_size, int64_t heads, int64_t head_dim) {
  const int64_t page = page_size * heads * head_dim;
  return layout == KvLayout::kNHD ? MutTensorRef{p, page, heads * head_dim, head_dim, 1}
                                  : MutTensorRef{p, page, head_dim, page_size * head_dim, 1};
}

// Merges split partial results, LSE-exact:
//   m = max_s lse_s;  w_s = exp(lse_s - m);  lse = m + log Σ_s w_s;  out = Σ_s w_s O_s / Σ_s w_s.
// Splits with lse_s = -inf contribute nothing; when all are -inf, out = 0 and lse = -inf.
struct CombineParams {
  Device device = Device::kCPU;
  DType dtype = DType::kFloat32;  // of out
  int num_threads = 0;
  void* stream = nullptr;
  int64_t num_splits = 0, batch = 0, seqlen_q = 0, heads = 0, head_dim = 0;
  // (num_splits, batch, seqlen_q, heads, head_dim) fp32, last dimension contiguous
  const float* out_partial = nullptr;
  int64_t out_partial_split_stride = 0, out_partial_batch_stride = 0, out_partial_row_stride = 0,
          out_partial_head_stride = 0;
  // (num_splits, batch, heads, seqlen_q) fp32, rows contiguous
  const float* lse_partial = nullptr;
  int64_t lse_partial_split_stride = 0, lse_partial_batch_stride = 0, lse_partial_head_stride = 0;
  MutTensorRef out;      // (batch, seqlen_q, heads, head_dim) in dtype
  float* lse = nullptr;  // (batch, heads, seqlen_q) fp32; may be null
  int64_t lse_batch_stride = 0, lse_head_stride = 0;
};

}  // namespace flashlab
