// src/cuda/decode/decode_kernel.cuh — attention of a few query rows against a K/V cache (decode,
// speculative decoding), memory-bound: the kernel's job is to stream K and V at the copy ceiling.
//
// One CTA = (split of the keys, sequence b, kv head, chunk of kRows query rows). The rows are the
// (query position, query head of the kv head's group) pairs: GQA's query heads share every K/V
// byte the CTA reads. Semantics are docs/kvcache.md's (and src/cpu/kvcache_reference.cpp's): key j
// of sequence b is cache slot leftpad[b] + j, j < L_b = cache_seqlens[b] - leftpad[b]; query i is
// at position L_b - seqlen_q + i; mask.h's visible_keys(); the score chain of modify_score().
//
// Inside a CTA (128 threads): a key row is kChunks = D/8 chunks of 16 bytes; kChunks consecutive
// lanes ("a group") own one key at a time, one chunk each, so a warp's loads are whole rows. There
// are kGroups = 128 / kChunks groups; group g takes keys g, g + kGroups, ... of the CTA's range,
// kKeys of them per iteration, the next iteration's K and V loads issued before this one's
// arithmetic (two register buffers). q is read from shared memory (fp32). Each group keeps its own
// online softmax (m, l, O) for the kRows rows: the scores are reduced over the group's lanes with
// shuffles, so every lane of a group holds them, and the loop has no __syncthreads. At the end the
// groups' (m, l, O) are merged through shared memory, exactly as splits are merged.
// Output: O and LSE directly (one split), or fp32 partials that combine_kernel.cuh merges.
//
// This file also holds what the two decode kernels share (decode_tile_kernel.cuh is the other):
// the params, the cache addressing (slot_place), a split's keys (split_keys), a row's visible keys
// (row_keys), the score chain and the end-of-CTA merge (merge_and_store); the split merge is
// combine_kernel.cuh, the (fused) append append_kernel.cuh.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/common/fast_div.h"
#include "cuda/common/ptx_sm80.cuh"
#include "cuda/decode/append_rule.cuh"
#include "flashlab/mask.h"

namespace flashlab {
namespace decode {

constexpr int kThreads = 128;
constexpr int kRows = 4;  // query rows per CTA (more rows: more CTAs over the same keys, from L2)
// The loop's shape (measured on the H100, 2026-11-24: docs/perf.md, "Decode"). kKeys keys per
// group per iteration, and the next iteration's K and V loads are issued before this iteration's
// arithmetic (registers double-buffered), so loads stay in flight; kMinBlocks CTAs per SM asked of
// ptxas (registers capped at 65536 / (128 · 4) = 128; sm_90a: 128 registers, bf16 16 bytes spilled);
// q lives in shared memory (fp32, read per key: 32 registers fewer, the two groups of a warp read
// the same addresses).
constexpr int kKeys = 2;
constexpr int kMinBlocks = 4;
constexpr float kLog2e = 1.4426950408889634f;

struct DecodeParams {
  // queries and outputs, (batch, seqlen_q, heads_q, head_dim) in the dtype; lse (batch, heads_q, seqlen_q)
  const void* q = nullptr;
  int64_t q_batch_stride = 0, q_row_stride = 0, q_head_stride = 0;
  void* out = nullptr;
  int64_t o_batch_stride = 0, o_row_stride = 0, o_head_stride = 0;
  float* lse = nullptr;
  int64_t lse_batch_stride = 0, lse_head_stride = 0;
  // the cache: slot s of sequence b, kv head h at (page or row) * batch_stride + (s within the page
  // or s) * row_stride + h * head_stride
  const void* k = nullptr;
  const void* v = nullptr;
  int64_t k_batch_stride = 0, k_row_stride = 0, k_head_stride = 0;
  int64_t v_batch_stride = 0, v_row_stride = 0, v_head_stride = 0;
  const int32_t* block_table = nullptr;  // null: contiguous
  int64_t block_table_stride = 0;
  int page_size = 1;
  // slot / page_size as a multiply-high (set on the host) where every slot fits an int; page_fast
  // false: the 64-bit division
  common::FastDiv page_div;
  bool page_fast = false;
  const int32_t* cache_batch_idx = nullptr;
  const int32_t* cache_seqlens = nullptr;  // before the (fused) append: L = cache_seqlens + seqlen_new - leftpad
  const int32_t* cache_leftpad = nullptr;
  int seqlen_new = 0;  // rows the fused append writes (append_kernel.cuh, launched first on the same stream)
  // The fused append's rule (append_rule.cuh, sequence_ok), applied when the call appends or
  // rotates (guard): a sequence that fails it was not appended, and its outputs and LSE are NaN
  // (merge_and_store; combine_kernel.cuh passes NaN partials on), never a finite answer.
  bool guard = false;
  int64_t capacity = 0;       // cache slots per sequence
  int rotary_dim = 0;         // 0: no rotary; else positions must stay within the table's rows
  int64_t rotary_max_pos = 0;
  // Rotated queries: with q_rotate (the tile kernel) q is the caller's, rotated after its load with
  // these tables' rows staged in shared memory (append_kernel.cuh, rotate_vec_rows: the append's
  // code and bits); else q is the fused append's rotated workspace copy (v5, q not 16-byte aligned,
  // seqlen_q > kStagedRows, or tables that fail rotary_vec_ok for 8-element vectors).
  bool q_rotate = false;
  const void* cos = nullptr;  // (rotary_max_pos, rotary_dim / 2) in table_dtype (append_kernel.cuh)
  const void* sin = nullptr;
  int table_dtype = 0;
  bool neox = true;
  bool rotary_vec = false;  // append_kernel.cuh's rotate_vec conditions (set_rotary)
  // The fused append done by the tile kernel itself (decode.cu: one launch instead of the append
  // kernel's and this one's): k_new / v_new (batch, seqlen_new, heads_kv, head_dim), 16-byte
  // aligned; num_pages / batch_cache bound the page entries / cache rows a write may use (the
  // append kernel's checks).
  bool append_in_kernel = false;
  const void* k_new = nullptr;
  const void* v_new = nullptr;
  int64_t kn_batch_stride = 0, kn_row_stride = 0, kn_head_stride = 0;
  int64_t vn_batch_stride = 0, vn_row_stride = 0, vn_head_stride = 0;
  int64_t num_pages = 0, batch_cache = 0;
  // After a fused append the tile kernel streams the older keys before the append completes and
  // waits only before the tile holding the first new key (decode_tile_kernel.cuh), unless
  // wait_first: q is the append's workspace copy, or cache_batch_idx is given (the older keys of one
  // sequence could be another's new slots where two sequences share a row).
  bool wait_first = false;
  // sizes
  int batch = 0, seqlen_q = 0, heads_q = 0, heads_kv = 0, group = 1, head_dim = 0, rows = 0;
  // scores
  float scale = 0.0f, softcap = 0.0f;
  const float* alibi_slopes = nullptr;
  int64_t alibi_batch_stride = 0;
  int64_t window_left = -1, window_right = -1;  // causal already folded in (right = 0)
  // attention sinks (heads_q) or null: added where the splits are merged (merge_and_store with one
  // split, combine_kernel otherwise), never to a split's partial, so every split count agrees
  const float* sink_logits = nullptr;
  // splits: split_size > 0 fixes the keys per split; else each sequence is cut into the
  // num_splits - sink_split regular splits
  int num_splits = 1;
  int64_t split_size = 0;
  // StreamingLLM sink tokens (docs/design/sink-tokens.md): a row also sees keys [0, s_i),
  // s_i = sink_keys(). They are one more split, the last (sink_split = 1 where a left window can
  // hide them; decode.cu), whose rows see only [0, s_i): disjoint from the window the regular
  // splits cover, so the combine merges them as any split.
  int64_t sink_tokens = 0;
  int sink_split = 0;
  float* o_partial = nullptr;    // (num_splits, batch, seqlen_q, heads_q, head_dim) fp32
  float* lse_partial = nullptr;  // (num_splits, batch, heads_q, seqlen_q) fp32
};

template <typename T>
struct Vec;
template <>
struct Vec<__nv_bfloat16> {
  using T2 = __nv_bfloat162;
  static __device__ __forceinline__ float2 to_float2(T2 x) { return __bfloat1622float2(x); }
  static __device__ __forceinline__ T2 from_float2(float a, float b) { return __floats2bfloat162_rn(a, b); }
};
template <>
struct Vec<__half> {
  using T2 = __half2;
  static __device__ __forceinline__ float2 to_float2(T2 x) { return __half22float2(x); }
  static __device__ __forceinline__ T2 from_float2(float a, float b) { return __floats2half2_rn(a, b); }
};

// 8 elements (16 bytes) -> floats.
template <typename T>
__device__ __forceinline__ void unpack8(const uint4& raw, float (&f)[8]) {
  const auto* h = reinterpret_cast<const typename Vec<T>::T2*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 x = Vec<T>::to_float2(h[i]);
    f[2 * i] = x.x;
    f[2 * i + 1] = x.y;
  }
}
template <typename T>
__device__ __forceinline__ uint4 pack8(const float (&f)[8]) {
  uint4 raw;
  auto* h = reinterpret_cast<typename Vec<T>::T2*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = Vec<T>::from_float2(f[2 * i], f[2 * i + 1]);
  return raw;
}

// Where cache slot `slot` of sequence b lies: (page or cache row, slot within it). Per key: a page
// may hold a single slot, so nothing is assumed about neighbouring keys.
__device__ __forceinline__ void slot_place(const DecodeParams& p, int b, int64_t slot, int64_t* block,
                                           int64_t* within) {
  if (p.block_table != nullptr) {
    if (p.page_fast) {
      int w;
      const int page = p.page_div.divmod(static_cast<int>(slot), &w);
      *block = p.block_table[b * p.block_table_stride + page];
      *within = w;
    } else {
      *block = p.block_table[b * p.block_table_stride + slot / p.page_size];
      *within = slot % p.page_size;
    }
  } else {
    *block = p.cache_batch_idx != nullptr ? p.cache_batch_idx[b] : b;
    *within = slot;
  }
}

// Element offset of cache slot `slot` of sequence b, kv head h (stride set of K or V).
__device__ __forceinline__ int64_t slot_offset(const DecodeParams& p, int b, int64_t slot, int h, int64_t bs,
                                               int64_t rs, int64_t hs) {
  int64_t block, within;
  slot_place(p, b, slot, &block, &within);
  return block * bs + within * rs + int64_t(h) * hs;
}

// A CTA's work from its flat index: blockIdx.x = ((split · batch + b) · heads_kv + hk) · chunks +
// chunk, chunk = the CTA's rows_per_cta query rows. The row chunks of one (sequence, kv head) are
// neighbours in launch order, so they run at the same time and read each K/V tile once from DRAM
// and then from L2 (seqlen_q · group > rows_per_cta: speculative steps, large GQA groups); then the
// kv heads of a sequence (neighbouring cache bytes); splits vary slowest. One dimension: up to
// 2^31 - 1 CTAs (decode.cu checks), where gridDim.y / z would stop at 65535.
struct CtaWork {
  int split, b, hk, row0;
};
__device__ __forceinline__ CtaWork cta_work(const DecodeParams& p, int rows_per_cta) {
  const int chunks = (p.rows + rows_per_cta - 1) / rows_per_cta;
  int x = static_cast<int>(blockIdx.x);
  CtaWork w;
  w.row0 = (x % chunks) * rows_per_cta;
  x /= chunks;
  w.hk = x % p.heads_kv;
  x /= p.heads_kv;
  w.b = x % p.batch;
  w.split = x / p.batch;
  return w;
}

// The keys of sequence b (L of them, the first at cache slot lp) and this split's part [n0, n1);
// *sinks: this is the sink tokens' split (keys [0, min(sink_tokens, L)); row_keys).
__device__ __forceinline__ void split_keys(const DecodeParams& p, int b, int split, int64_t* lp, int64_t* L,
                                           int64_t* n0, int64_t* n1, bool* sinks) {
  *lp = p.cache_leftpad != nullptr ? p.cache_leftpad[b] : 0;
  *L = int64_t(p.cache_seqlens[b]) + p.seqlen_new - *lp;
  *sinks = p.sink_split != 0 && split == p.num_splits - 1;
  if (*sinks) {
    *n0 = 0;
    *n1 = p.sink_tokens < *L ? p.sink_tokens : *L;
    return;
  }
  if (p.split_size > 0) {
    *n0 = int64_t(split) * p.split_size;
    *n1 = *n0 + p.split_size;
  } else {
    const int regular = p.num_splits - p.sink_split;
    const int64_t size = *L > 0 ? (*L + regular - 1) / regular : 1;
    *n0 = int64_t(split) * size;
    *n1 = *n0 + size;
  }
  if (*n1 > *L) *n1 = *L;
  // A split past the sequence's end (n0 = split · size may pass L) is empty: the kernels start the
  // union of their rows' keys as the inverted range [n1, n0), which must not be a non-empty one.
  if (*n0 > *n1) *n0 = *n1;
}

__device__ __forceinline__ RowMask sequence_mask(const DecodeParams& p, int64_t L) {
  RowMask mask;
  mask.seqlen_q = p.seqlen_q;
  mask.seqlen_k = L;
  mask.shift = L - p.seqlen_q;
  mask.left = p.window_left;
  mask.right = p.window_right;
  mask.sink = p.sink_tokens;
  return mask;
}

// Row i's keys in a split, before the clamp to the split: its window [lo, hi] (visible_keys), or
// in the sink split its sink tokens [0, s_i) (every one left of lo: sink_keys).
__device__ __forceinline__ void split_visible_keys(const RowMask& mask, int64_t i, bool sinks, int64_t* lo,
                                                   int64_t* hi) {
  if (sinks) {
    *lo = 0;
    *hi = sink_keys(mask, i) - 1;
  } else {
    visible_keys(mask, i, lo, hi);
  }
}

// One query row of a CTA: row rr of the (kv head's) rows is query i = rr / group, query head
// hq = hk · group + rr % group. Its visible keys inside this split are [lo, hi] (the empty (0, -1)
// when it has none, or when rr is past the rows: a padding row), its diagonal and ALiBi slope.
//
// Positions are int (32 bits; the loops' compares and the ALiBi distance cost fewer registers).
// This is exact for the keys that are ever used: the keys of sequence b are j in [0, L) with
// L = cache_seqlens[b] - leftpad[b] <= cache_seqlens[b] < 2^31 (cache_seqlens is int32;
// 0 <= leftpad <= cache_seqlens, docs/kvcache.md); lo and hi are clamped to this split's [n0, n1)
// with n1 <= L in int64, and a row left with no key here is set to the empty range (0, -1) before
// narrowing (split_keys keeps n0 <= n1 <= L). A row with a key has L >= 1, so
// diag = L - seqlen_q + i lies in (-2^31, 2^31) and |diag - j| <= max(L, seqlen_q) - 1; diag of a
// row with no key is never read.
struct RowKeys {
  int lo, hi, diag;
  float slope;
};
__device__ __forceinline__ RowKeys row_keys(const DecodeParams& p, const RowMask& mask, int b, int hk, int rr,
                                            int64_t n0, int64_t n1, bool sinks) {
  RowKeys k{0, -1, 0, 0.0f};
  const int i = rr / p.group;
  k.diag = static_cast<int>(i + mask.shift);
  if (rr >= p.rows) return k;
  int64_t lo64, hi64;
  split_visible_keys(mask, i, sinks, &lo64, &hi64);
  if (lo64 < n0) lo64 = n0;
  if (hi64 > n1 - 1) hi64 = n1 - 1;
  if (lo64 > hi64) return k;  // no key of this row in this split
  k.lo = static_cast<int>(lo64);
  k.hi = static_cast<int>(hi64);
  if (p.alibi_slopes != nullptr)
    k.slope = p.alibi_slopes[b * p.alibi_batch_stride + hk * p.group + rr % p.group];
  return k;
}

// cap · tanh(x / cap), as the CPU reference's modify_score (tanhf: accurate, and the decode kernel
// is memory-bound, so its cost hides).
// Positions as int: see row_keys.
__device__ __forceinline__ float score_chain(const DecodeParams& p, float dot, float slope, int diag, int j) {
  float s = dot * p.scale;
  if (p.softcap > 0.0f) s = p.softcap * tanhf(s / p.softcap);
  if (slope != 0.0f) {
    const int dist = diag > j ? diag - j : j - diag;
    s -= slope * static_cast<float>(dist);
  }
  return s;
}

// The end of a CTA, shared by the kernels: kParts partial softmax states (m, l, O) of its kRowsCta
// rows in shared memory (m, l: (kParts, kRowsCta); o: (kParts, kRowsCta, kD), fp32, O not yet
// divided by l) are merged exactly as splits are: m = max_g m_g, w_g = exp(m_g - m), l = Σ w_g l_g,
// O = Σ w_g O_g / l; then written as O and LSE (one split) or as this split's fp32 partials. With
// one split the attention sink joins here (m includes it, l gets exp(sink - m), O nothing: as
// combine_kernel does after splits).
// Whether the fused append refused sequence b (its rule, append_rule.cuh).
__device__ __forceinline__ bool append_failed(const DecodeParams& p, int b) {
  int64_t len, lp;
  return p.guard && !sequence_ok(p, b, &len, &lp);
}

template <typename T, int kD, int kParts, int kRowsCta>
__device__ __forceinline__ void merge_and_store(const DecodeParams& p, const float* sm_m, const float* sm_l,
                                                const float* sm_o, int split, int b, int hk, int row0) {
  constexpr int kChunks = kD / 8;
  // NaN queries (the append's rotated copy of a refused sequence) give scores that fmaxf drops:
  // such a row would look empty (out 0, LSE -inf) below, so the rule is checked here.
  const bool failed = append_failed(p, b);
  for (int t = threadIdx.x; t < kRowsCta * kChunks; t += blockDim.x) {
    const int r = t / kChunks, cc = t % kChunks;
    const int rr = row0 + r;
    if (rr >= p.rows || cc * 8 >= p.head_dim) continue;
    const int i = rr / p.group;
    const int hq = hk * p.group + rr % p.group;
    const float sink = p.num_splits == 1 && p.sink_logits != nullptr ? p.sink_logits[hq] : -INFINITY;
    float mx = sink;
    for (int gg = 0; gg < kParts; ++gg) mx = fmaxf(mx, sm_m[gg * kRowsCta + r]);
    float sum = 0.0f, acc[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] = 0.0f;
    if (mx != -INFINITY) {
      for (int gg = 0; gg < kParts; ++gg) {
        const float w = exp2f((sm_m[gg * kRowsCta + r] - mx) * kLog2e);
        sum += w * sm_l[gg * kRowsCta + r];
        const float* og = sm_o + (gg * kRowsCta + r) * kD + cc * 8;
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[e] = fmaf(w, og[e], acc[e]);
      }
      if (sink != -INFINITY) sum += exp2f((sink - mx) * kLog2e);
    }
    const bool empty = !(sum > 0.0f);  // no visible key in this split
    const float inv = failed ? __int_as_float(0x7fc00000) : empty ? 0.0f : 1.0f / sum;
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] *= inv;
    const float lse = failed ? __int_as_float(0x7fc00000) : empty ? -INFINITY : mx + logf(sum);
    if (p.num_splits == 1) {
      T* op = static_cast<T*>(p.out) + b * p.o_batch_stride + int64_t(i) * p.o_row_stride +
              int64_t(hq) * p.o_head_stride + cc * 8;
      *reinterpret_cast<uint4*>(op) = pack8<T>(acc);
      if (p.lse != nullptr && cc == 0) p.lse[b * p.lse_batch_stride + int64_t(hq) * p.lse_head_stride + i] = lse;
    } else {
      const int64_t row = ((int64_t(split) * p.batch + b) * p.seqlen_q + i) * p.heads_q + hq;
      float* op = p.o_partial + row * p.head_dim + cc * 8;
      reinterpret_cast<float4*>(op)[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
      reinterpret_cast<float4*>(op)[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
      if (cc == 0) p.lse_partial[((int64_t(split) * p.batch + b) * p.heads_q + hq) * p.seqlen_q + i] = lse;
    }
  }
}

template <typename T, int kD>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    decode_kernel(const __grid_constant__ DecodeParams p) {
  constexpr int kChunks = kD / 8;
  constexpr int kGroups = kThreads / kChunks;
  static_assert(kChunks <= 32 && 32 % kChunks == 0, "a group of lanes lies within one warp");
  // Programmatic dependent launch (decode.cu): let the combine start; wait for the fused append.
  ptx::grid_dependents_launch();
  ptx::grid_dependency_wait();
  const CtaWork w = cta_work(p, kRows);
  const int split = w.split, b = w.b, hk = w.hk, row0 = w.row0;
  const int tid = threadIdx.x;
  const int c = tid % kChunks;  // this lane's 16-byte chunk of a row
  const int g = tid / kChunks;  // this lane's group
  const bool chunk_in = c * 8 < p.head_dim;

  int64_t lp, L, n0, n1;  // this split's keys [n0, n1) of the sequence's L
  bool sinks;
  split_keys(p, b, split, &lp, &L, &n0, &n1, &sinks);
  const RowMask mask = sequence_mask(p, L);

  // The rows: their visible keys inside this split, as row_keys() computes them (written out here:
  // calling row_keys costs this kernel 60 bytes of spill at its 128-register cap, ptxas sm_90a,
  // nvcc 13.0, 2026-11-24; inline it has none); q in shared memory (fp32).
  __shared__ __align__(16) float sm_q[kRows][kD];
  float qf[8];
  int lo[kRows], hi[kRows], diag[kRows];
  float slope[kRows];
  int64_t k_begin = n1, k_end = n0;  // the union of the rows' visible keys in this split
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int rr = row0 + r;
    const int i = rr / p.group;
    const int hq = hk * p.group + rr % p.group;
    lo[r] = 0;
    hi[r] = -1;
    slope[r] = 0.0f;
    diag[r] = static_cast<int>(i + mask.shift);
#pragma unroll
    for (int e = 0; e < 8; ++e) qf[e] = 0.0f;
    if (g == 0) {
#pragma unroll
      for (int e = 0; e < 8; ++e) sm_q[r][c * 8 + e] = 0.0f;
    }
    if (rr >= p.rows) continue;
    int64_t lo64, hi64;
    split_visible_keys(mask, i, sinks, &lo64, &hi64);
    if (lo64 < n0) lo64 = n0;
    if (hi64 > n1 - 1) hi64 = n1 - 1;
    if (lo64 > hi64) {  // no key of this row in this split
      lo64 = 0;
      hi64 = -1;
    }
    lo[r] = static_cast<int>(lo64);
    hi[r] = static_cast<int>(hi64);
    if (lo[r] <= hi[r]) {
      if (lo[r] < k_begin) k_begin = lo[r];
      if (hi[r] + 1 > k_end) k_end = hi[r] + 1;
    }
    if (p.alibi_slopes != nullptr) slope[r] = p.alibi_slopes[b * p.alibi_batch_stride + hq];
    if (chunk_in) {
      const T* qp = static_cast<const T*>(p.q) + b * p.q_batch_stride + int64_t(i) * p.q_row_stride +
                    int64_t(hq) * p.q_head_stride + c * 8;
      unpack8<T>(*reinterpret_cast<const uint4*>(qp), qf);
      if (g == 0) {
#pragma unroll
        for (int e = 0; e < 8; ++e) sm_q[r][c * 8 + e] = qf[e];
      }
    }
  }

  __syncthreads();  // sm_q complete

  // Each group's online softmax over its keys.
  float m[kRows], l[kRows], o[kRows][8];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) o[r][e] = 0.0f;
  }
  const T* kbase = static_cast<const T*>(p.k) + c * 8;
  const T* vbase = static_cast<const T*>(p.v) + c * 8;
  constexpr int64_t kStep = int64_t(kGroups) * kKeys;  // keys of the CTA per iteration
  auto load = [&](int64_t j0, uint4 (&kr)[kKeys], uint4 (&vr)[kKeys]) __attribute__((always_inline)) {
#pragma unroll
    for (int k = 0; k < kKeys; ++k) {
      const int64_t j = j0 + g + int64_t(k) * kGroups;
      kr[k] = make_uint4(0, 0, 0, 0);
      vr[k] = make_uint4(0, 0, 0, 0);
      if (j < k_end && chunk_in) {
        const int64_t slot = lp + j;
        kr[k] = *reinterpret_cast<const uint4*>(
            kbase + slot_offset(p, b, slot, hk, p.k_batch_stride, p.k_row_stride, p.k_head_stride));
        vr[k] = *reinterpret_cast<const uint4*>(
            vbase + slot_offset(p, b, slot, hk, p.v_batch_stride, p.v_row_stride, p.v_head_stride));
      }
    }
  };
  auto compute = [&](int64_t j0, const uint4 (&kr)[kKeys], const uint4 (&vr)[kKeys])
      __attribute__((always_inline)) {
    float s[kRows][kKeys];
#pragma unroll
    for (int k = 0; k < kKeys; ++k) {
      float kf[8];
      unpack8<T>(kr[k], kf);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) dot = fmaf(sm_q[r][c * 8 + e], kf[e], dot);
#pragma unroll
        for (int off = kChunks / 2; off >= 1; off /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, off);
        // j0 < k_end <= L < 2^31; j may pass 2^31 - 1 only past k_end, where the unsigned sum
        // wraps to a negative int that fails j >= lo (>= 0) instead of overflowing.
        const int j = static_cast<int>(static_cast<unsigned>(j0) + static_cast<unsigned>(g + k * kGroups));
        s[r][k] = (j >= lo[r] && j <= hi[r]) ? score_chain(p, dot, slope[r], diag[r], j) : -INFINITY;
      }
    }
    // Per row: the new max, α, O and l rescaled, S -> P (in place).
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float mx = m[r];
#pragma unroll
      for (int k = 0; k < kKeys; ++k) mx = fmaxf(mx, s[r][k]);
      const float alpha = mx == -INFINITY ? 1.0f : exp2f((m[r] - mx) * kLog2e);  // m = -inf: 0
      const float base = mx == -INFINITY ? 0.0f : mx;  // nothing visible yet: every P is 0
      m[r] = mx;
      l[r] *= alpha;
#pragma unroll
      for (int e = 0; e < 8; ++e) o[r][e] *= alpha;
#pragma unroll
      for (int k = 0; k < kKeys; ++k) {
        s[r][k] = exp2f((s[r][k] - base) * kLog2e);
        l[r] += s[r][k];
      }
    }
    // O += P·V, one key's V row unpacked at a time (8 registers, not kKeys x 8).
#pragma unroll
    for (int k = 0; k < kKeys; ++k) {
      float vf[8];
      unpack8<T>(vr[k], vf);
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int e = 0; e < 8; ++e) o[r][e] = fmaf(s[r][k], vf[e], o[r][e]);
    }
  };
  // Double-buffered: (ka, va) and (kb, vb) take turns; each iteration's loads are issued before
  // the other buffer's arithmetic.
  uint4 ka[kKeys], va[kKeys], kb[kKeys], vb[kKeys];
  if (k_begin < k_end) load(k_begin, ka, va);
  for (int64_t j0 = k_begin; j0 < k_end; j0 += 2 * kStep) {
    load(j0 + kStep, kb, vb);  // past k_end: nothing is read
    compute(j0, ka, va);
    if (j0 + kStep >= k_end) break;
    load(j0 + 2 * kStep, ka, va);
    compute(j0 + kStep, kb, vb);
  }

  // Merge the groups (merge_and_store).
  __shared__ float sm_m[kGroups * kRows], sm_l[kGroups * kRows];
  __shared__ float sm_o[kGroups * kRows * kD];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (c == 0) {
      sm_m[g * kRows + r] = m[r];
      sm_l[g * kRows + r] = l[r];
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) sm_o[(g * kRows + r) * kD + c * 8 + e] = o[r][e];
  }
  __syncthreads();
  merge_and_store<T, kD, kGroups, kRows>(p, sm_m, sm_l, sm_o, split, b, hk, row0);
}

}  // namespace decode
}  // namespace flashlab
