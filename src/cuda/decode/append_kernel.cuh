// src/cuda/decode/append_kernel.cuh — the KV-cache append (docs/kvcache.md, "Append", "Rotary"):
// k_new (rotated) and v_new written at slots cache_seqlens[b] + t of a contiguous or paged cache,
// and, for the fused append of attention_with_kvcache, the queries rotated into a workspace copy.
//
// An elementwise copy, so the goal is the copy ceiling: one thread moves one vector of kVec
// elements (16 bytes when every pointer and stride allows it, else one element) of one row
// (head_dim elements of one (token, head)); consecutive threads take consecutive vectors of a
// row, so a warp's loads and stores are whole rows. Two row segments share one launch (a decode
// step appends a few rows: one launch, not two, is what its latency pays):
//   [0, kv_rows)            (b, t, kv head): the K vector rotated, then K and V stored in the cache
//                           (one index computation for both; K and V as two rows each cost its
//                           own, and the index math was half of the kernel's instructions: ncu,
//                           session 34)
//   [kv_rows, + q_rows)     Q rows (fused path with rotary only): (b, i, q head) -> q_rot, dense
//
// Bit-for-bit with the CPU (kv::append, kv::apply_rotary + ref::store_rounded): a rotated element
// is x0·c − x1·s (or x0·s + x1·c) in double — each product of a 16-bit (or fp32) value and an fp32
// table entry is exact in double, so FMA contraction cannot change the result — then rounded once
// to the dtype with round_to_dtype (the CPU's round-to-odd to fp32, then round-to-nearest-even).
// Elements that are not rotated (V, dims >= rotary_dim) are copied as raw bits.
//
// Device data is not validated on the host by default (kvcache.h, check_device_data). The kernel
// guards every write instead: a sequence whose append does not fit the capacity (or whose
// cache_seqlens / leftpad are out of range, or whose positions pass the rotary table) writes no
// cache slot and gets NaN queries; its attention output and LSE are NaN, not a silent wrong answer
// (the decode kernels check the same rule, append_rule.cuh, when they store: decode_kernel.cuh;
// NaN scores alone would be dropped by the softmax's max). A page entry or cache row out of range
// skips that slot's write.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/common/fast_div.h"
#include "cuda/common/ptx_sm80.cuh"
#include "cuda/decode/append_rule.cuh"
#include "flashlab/kvcache.h"

namespace flashlab {
namespace decode {

// The index math divides by FastDiv (common/fast_div.h): the rotary append did four divisions by
// runtime values per 16-byte vector, and ncu on the H100 counted IMAD, ISETP, I2F.RP and MUFU.RCP
// at 45 % of its instructions.
using common::FastDiv;

struct AppendParams {
  // new keys/values (batch, seqlen_new, heads_kv, head_dim)
  const void* k_new = nullptr;
  const void* v_new = nullptr;
  int64_t kn_batch_stride = 0, kn_row_stride = 0, kn_head_stride = 0;
  int64_t vn_batch_stride = 0, vn_row_stride = 0, vn_head_stride = 0;
  // the cache (decode_kernel.cuh's addressing: (page or row) · batch_stride + slot · row_stride + head · head_stride)
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  int64_t k_batch_stride = 0, k_row_stride = 0, k_head_stride = 0;
  int64_t v_batch_stride = 0, v_row_stride = 0, v_head_stride = 0;
  const int32_t* block_table = nullptr;  // null: contiguous
  int64_t block_table_stride = 0;
  int64_t page_size = 1;
  int64_t num_pages = 0;                 // paged: entries must be in [0, num_pages)
  const int32_t* cache_batch_idx = nullptr;
  int64_t batch_cache = 0;               // contiguous: rows must be in [0, batch_cache)
  const int32_t* cache_seqlens = nullptr;
  const int32_t* cache_leftpad = nullptr;
  int64_t capacity = 0;
  int batch = 0, seqlen_new = 0, heads_kv = 0, head_dim = 0;
  // rotary: cos/sin (max_pos, rotary_dim / 2) in table_dtype (TableDtype: fp32, bf16, fp16);
  // rotary_dim 0 = off
  const void* cos = nullptr;
  const void* sin = nullptr;
  int table_dtype = 0;
  int rotary_dim = 0;
  int64_t rotary_max_pos = 0;
  bool neox = true;
  // rotate_vec's conditions hold (launch_append): rotary_dim / 2 a multiple of the vector width
  // and both tables 16-byte aligned; else rotate_elem element by element
  bool rotary_vec = false;
  // queries (fused path with rotary): q (batch, seqlen_q, heads_q, head_dim) -> q_rot, dense
  const void* q = nullptr;
  int64_t q_batch_stride = 0, q_row_stride = 0, q_head_stride = 0;
  void* q_rot = nullptr;
  int seqlen_q = 0, heads_q = 0;
  // work: rows per segment, vectors per row
  int kv_rows = 0, q_rows = 0, vecs_per_row = 0;
  // The divisors of the index math (set_divisors(), on the host before the launch); page_div only
  // where every slot fits an int (paged_fast), else slot / page_size in 64 bits.
  FastDiv vecs_div, heads_kv_div, seqlen_new_div, heads_q_div, seqlen_q_div, page_div;
  bool paged_fast = false;
  void set_divisors() {
    vecs_div = FastDiv(vecs_per_row > 0 ? vecs_per_row : 1);
    heads_kv_div = FastDiv(heads_kv > 0 ? heads_kv : 1);
    seqlen_new_div = FastDiv(seqlen_new > 0 ? seqlen_new : 1);
    heads_q_div = FastDiv(heads_q > 0 ? heads_q : 1);
    seqlen_q_div = FastDiv(seqlen_q > 0 ? seqlen_q : 1);
    paged_fast = page_size > 0 && page_size <= INT32_MAX && capacity + seqlen_new <= INT32_MAX;
    page_div = FastDiv(paged_fast ? static_cast<int>(page_size) : 1);
  }
};

template <typename T>
__device__ __forceinline__ float elem_to_float(T x);
template <>
__device__ __forceinline__ float elem_to_float(float x) { return x; }
template <>
__device__ __forceinline__ float elem_to_float(__half x) { return __half2float(x); }
template <>
__device__ __forceinline__ float elem_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

// A double rounded once to T, as ref::store_rounded does on the CPU: to fp32 by round-to-odd (so
// the second rounding cannot double-round), then to T by round-to-nearest-even.
template <typename T>
__device__ __forceinline__ T round_to_dtype(double x);
template <>
__device__ __forceinline__ float round_to_dtype(double x) { return __double2float_rn(x); }
// Round-to-odd without branches: toward zero, then the last bit set where that was inexact (of the
// two floats around x, that makes the odd one). Above FLT_MAX it gives FLT_MAX (odd), which T's
// rounding takes to inf, as it takes inf; a NaN stays a NaN. Until session 33 it rounded to nearest
// and stepped with nextafterf, a branchy library call: the fused rotation of a decode step at 1k
// took ~2.4 µs longer (CUDA-graph replays, H200: docs/perf.md, session 33).
__device__ __forceinline__ float round_to_odd_float(double x) {
  const float t = __double2float_rz(x);
  return __uint_as_float(__float_as_uint(t) | (static_cast<double>(t) != x ? 1u : 0u));
}
template <>
__device__ __forceinline__ __half round_to_dtype(double x) { return __float2half_rn(round_to_odd_float(x)); }
template <>
__device__ __forceinline__ __nv_bfloat16 round_to_dtype(double x) {
  return __float2bfloat16_rn(round_to_odd_float(x));
}

// kVec elements of T as one load / store (16 bytes: uint4; 1 element: T itself).
template <typename T, int kVec>
struct VecOf {
  static_assert(kVec * sizeof(T) == 16, "a vector is 16 bytes (or one element: the specialization below)");
  using type = uint4;
};
template <typename T>
struct VecOf<T, 1> {
  using type = T;
};

// Where slot `slot` of sequence b lies: its page (or cache row) and the slot within it; false when
// the page entry / cache row is out of range (the write is skipped). K and V share it.
__device__ __forceinline__ bool append_slot_place(const AppendParams& p, int b, int64_t slot, int64_t* block,
                                                  int64_t* within) {
  if (p.block_table != nullptr) {
    if (p.paged_fast) {
      int rem;
      const int page = p.page_div.divmod(static_cast<int>(slot), &rem);
      *block = p.block_table[b * p.block_table_stride + page];
      *within = rem;
    } else {
      *block = p.block_table[b * p.block_table_stride + slot / p.page_size];
      *within = slot % p.page_size;
    }
    return *block >= 0 && *block < p.num_pages;
  }
  *block = p.cache_batch_idx != nullptr ? p.cache_batch_idx[b] : b;
  *within = slot;
  return *block >= 0 && *block < p.batch_cache;
}

// The rotary tables' element types (AppendParams / DecodeParams::table_dtype): a 16-bit entry is
// used as its exact fp32 value, so every table type gives the CPU's bits for the same values.
enum TableDtype : int { kTableF32 = 0, kTableBF16 = 1, kTableF16 = 2 };
// The host side (kvcache_ops.cu's append, decode.cu's tile kernel): a params struct's rotary fields
// (AppendParams or DecodeParams: cos, sin, table_dtype, rotary_dim, rotary_max_pos, neox,
// rotary_vec) from the call's. rotary_vec (rotary_vec_ok, which decode.cu also asks before
// set_rotary) is rotate_vec's rule for k_vec-element vectors (k_vec < 4: never): half the rotary
// dims whole vectors, both tables 16-byte aligned.
// And the new rows' fields (k_new, v_new, their strides, and the bounds a write checks: num_pages,
// batch_cache), which AppendParams and DecodeParams (decode_tile_kernel.cuh, store_new_keys) name
// alike.
template <typename P>
inline void set_new_rows(P* d, const KvCacheParams& p) {
  d->k_new = p.k_new.ptr;
  d->v_new = p.v_new.ptr;
  d->kn_batch_stride = p.k_new.batch_stride;
  d->kn_row_stride = p.k_new.row_stride;
  d->kn_head_stride = p.k_new.head_stride;
  d->vn_batch_stride = p.v_new.batch_stride;
  d->vn_row_stride = p.v_new.row_stride;
  d->vn_head_stride = p.v_new.head_stride;
  d->num_pages = p.num_pages;
  d->batch_cache = p.batch_cache ? p.batch_cache : p.batch;
}
inline bool rotary_vec_ok(const KvCacheParams& p, int k_vec) {
  return k_vec >= 4 && (p.rotary_dim / 2) % k_vec == 0 && reinterpret_cast<uintptr_t>(p.rotary_cos) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(p.rotary_sin) % 16 == 0;
}
template <typename P>
inline void set_rotary(P* d, const KvCacheParams& p, int k_vec) {
  if (p.rotary_cos == nullptr) return;
  d->cos = p.rotary_cos;
  d->sin = p.rotary_sin;
  d->table_dtype = p.rotary_dtype == DType::kBFloat16 ? kTableBF16 : p.rotary_dtype == DType::kFloat16 ? kTableF16
                                                                                                      : kTableF32;
  d->rotary_dim = static_cast<int>(p.rotary_dim);
  d->rotary_max_pos = p.rotary_max_pos;
  d->neox = p.rotary_style == RotaryStyle::kNeoX;
  d->rotary_vec = rotary_vec_ok(p, k_vec);
}

__device__ __forceinline__ float table_at(int dtype, const void* t, int64_t i) {
  if (dtype == kTableBF16) return __bfloat162float(static_cast<const __nv_bfloat16*>(t)[i]);
  if (dtype == kTableF16) return __half2float(static_cast<const __half*>(t)[i]);
  return static_cast<const float*>(t)[i];
}

// One rotated element, rounded once to T: with `self` the element and `other` its pair partner,
// x0·c − x1·s for the pair's first element (self = x0) and x0·s + x1·c for its second (self = x1),
// i.e. self·c + other·(∓s) for both. The products are exact in double, so this is the value
// rounded once. Written as `first ? x0·c − x1·s : x0·s + x1·c` the compiler computed both forms
// and selected (16 DMUL and 16 DFMA per 8 NeoX elements: ncu, session 34).
template <typename T>
__device__ __forceinline__ T rotated_elem(float self, float other, float c, float s, bool first) {
  return round_to_dtype<T>(static_cast<double>(self) * c + static_cast<double>(other) * (first ? -s : s));
}

// Rotated element e of a row (e < rotary_dim) at table row `pos`; x = the row in global memory.
// The partner element is read again from global memory (the warp just loaded the row: an L1 hit),
// which keeps any rotary_dim and vector width correct without shuffles.
// P: AppendParams, or DecodeParams (the tile decode kernel rotates the queries itself as it loads
// them, decode_tile_kernel.cuh): rotary_dim, neox, cos, sin, rotary_vec.
template <typename T, typename P>
__device__ __forceinline__ T rotate_elem(const P& p, const T* x, int e, int64_t pos) {
  const int half = p.rotary_dim / 2;
  int k, partner;
  bool first;  // the pair's first element: x0·c − x1·s; else x0·s + x1·c
  if (p.neox) {
    first = e < half;
    k = first ? e : e - half;
    partner = first ? e + half : e - half;
  } else {
    first = (e & 1) == 0;
    k = e >> 1;
    partner = e ^ 1;
  }
  return rotated_elem<T>(elem_to_float(x[e]), elem_to_float(x[partner]), table_at(p.table_dtype, p.cos, pos * half + k),
                         table_at(p.table_dtype, p.sin, pos * half + k), first);
}

// The kVec elements e0 ... e0 + kVec - 1 of a row, rotated in place in `raw` (which holds them):
// the same products as rotate_elem, with the loads vectorized. rotate_elem loads each element's
// cos, sin, partner and itself one by one (4 loads per element: the rotary append ran at 0.64 of a
// copy, H100 2026-11-24); here the tables come as float4 and the partner as one vector (NeoX) or from
// `raw` itself (interleaved pairs sit in one vector). Needs rotary_dim / 2 a multiple of kVec (a
// vector lies in one half, the partner vector and the table entries are aligned) and the tables
// 16-byte aligned: AppendParams::rotary_vec. Entries i0 ... i0 + kN - 1 of a table, as floats: fp32
// by float4 / float2, 16-bit by one load of kN · 2 bytes (16, 8 or 4; i0 a multiple of kN).
// Mem: where the table sits. GlobalMem reads it with plain loads; the tile decode kernel's rows
// staged in shared memory are read with ld.shared (decode_tile_kernel.cuh, SharedMem).
struct GlobalMem {
  template <typename W>
  __device__ static __forceinline__ W load(const void* ptr) {
    return *reinterpret_cast<const W*>(ptr);
  }
};
template <int kN, typename Mem = GlobalMem>
__device__ __forceinline__ void load_floats(int dtype, const void* table, int64_t i0, float (&dst)[kN]) {
  static_assert(kN % 2 == 0, "float2 / float4 loads");
  if (dtype != kTableF32) {
    using W = typename std::conditional<kN == 8, uint4, typename std::conditional<kN == 4, uint2, uint32_t>::type>::type;
    static_assert(kN == 8 || kN == 4 || kN == 2, "16-bit table loads of 16, 8 or 4 bytes");
    const W w = Mem::template load<W>(static_cast<const uint16_t*>(table) + i0);
    const uint16_t* h = reinterpret_cast<const uint16_t*>(&w);
#pragma unroll
    for (int i = 0; i < kN; ++i)
      dst[i] = dtype == kTableBF16 ? __bfloat162float(__ushort_as_bfloat16(h[i])) : __half2float(__ushort_as_half(h[i]));
    return;
  }
  const float* src = static_cast<const float*>(table) + i0;
  if constexpr (kN % 4 == 0) {
#pragma unroll
    for (int i = 0; i < kN; i += 4) {
      const float4 v = Mem::template load<float4>(src + i);
      dst[i] = v.x, dst[i + 1] = v.y, dst[i + 2] = v.z, dst[i + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kN; i += 2) {
      const float2 v = Mem::template load<float2>(src + i);
      dst[i] = v.x, dst[i + 1] = v.y;
    }
  }
}
// Row `pos` of a rotary table (its half = rotary_dim / 2 entries) as a byte address.
__device__ __forceinline__ const void* table_row(int dtype, const void* table, int64_t pos, int half) {
  return static_cast<const char*>(table) + pos * half * (dtype == kTableF32 ? 4 : 2);
}
// rotate_vec's arithmetic with its inputs at hand: `raw` (elements e0 ... e0 + kVec - 1 of a row)
// rotated in place, `partner` the vector of the NeoX partner elements (unused with interleaved
// pairs, which sit in `raw`), cos_row / sin_row the table rows of the position (in global memory,
// or in shared memory with Mem = SharedMem). One function for the append kernel and for the tile
// decode kernel, which stages the rows in shared memory (decode_tile_kernel.cuh, stage_tables): the
// same bits.
template <typename T, int kVec, typename Mem = GlobalMem, typename V>
__device__ __forceinline__ void rotate_vec_rows(bool neox, int dtype, int half, int e0, const void* cos_row,
                                                const void* sin_row, const V& partner, V& raw) {
  static_assert(kVec >= 4, "vectors of 16 bytes (4 fp32 or 8 16-bit elements)");
  T* el = reinterpret_cast<T*>(&raw);
  if (neox) {
    const bool first = e0 < half;  // the whole vector is in one half
    const int k0 = first ? e0 : e0 - half;
    const T* other = reinterpret_cast<const T*>(&partner);
    float c[kVec], s[kVec];
    load_floats<kVec, Mem>(dtype, cos_row, k0, c);
    load_floats<kVec, Mem>(dtype, sin_row, k0, s);
#pragma unroll
    for (int u = 0; u < kVec; ++u) el[u] = rotated_elem<T>(elem_to_float(el[u]), elem_to_float(other[u]), c[u], s[u], first);
  } else {
    float c[kVec / 2], s[kVec / 2];
    load_floats<kVec / 2, Mem>(dtype, cos_row, e0 / 2, c);
    load_floats<kVec / 2, Mem>(dtype, sin_row, e0 / 2, s);
#pragma unroll
    for (int j = 0; j < kVec / 2; ++j) {
      const float x0 = elem_to_float(el[2 * j]), x1 = elem_to_float(el[2 * j + 1]);
      el[2 * j] = rotated_elem<T>(x0, x1, c[j], s[j], true);
      el[2 * j + 1] = rotated_elem<T>(x1, x0, c[j], s[j], false);
    }
  }
}
template <typename T, int kVec, typename P, typename V>
__device__ __forceinline__ void rotate_vec(const P& p, const T* x, int e0, int64_t pos, V& raw) {
  const int half = p.rotary_dim / 2;
  const V partner = p.neox ? *reinterpret_cast<const V*>(x + (e0 < half ? e0 + half : e0 - half)) : raw;
  rotate_vec_rows<T, kVec>(p.neox, p.table_dtype, half, e0, table_row(p.table_dtype, p.cos, pos, half),
                           table_row(p.table_dtype, p.sin, pos, half), partner, raw);
}

// Rotate the kVec elements from e0 held in `raw` (of row x) at table row pos: vectorized where
// AppendParams::rotary_vec allows, else element by element.
template <typename T, int kVec, typename P, typename V>
__device__ __forceinline__ void rotate(const P& p, const T* x, int e0, int64_t pos, V& raw) {
  if constexpr (kVec >= 4) {
    if (p.rotary_vec) {
      rotate_vec<T, kVec>(p, x, e0, pos, raw);
      return;
    }
  }
  T* el = reinterpret_cast<T*>(&raw);
#pragma unroll
  for (int u = 0; u < kVec; ++u)
    if (e0 + u < p.rotary_dim) el[u] = rotate_elem<T>(p, x, e0 + u, pos);
}

// Query row x (query i of sequence b; P: AppendParams or DecodeParams) rotated at its position
// L_b - seqlen_q + i: the kVec elements from e0, held in `raw`, in place; NaN where the sequence's
// append fails its rule (sequence_ok) or the position is negative (see the header). One function
// for the fused append's workspace copy and the tile decode kernel's own rotation: the same bits.
template <typename T, int kVec, typename P, typename V>
__device__ __forceinline__ void rotate_query(const P& p, int b, int i, const T* x, int e0, V& raw) {
  int64_t len, lp;
  const bool ok = sequence_ok(p, b, &len, &lp);
  const int64_t pos = len + p.seqlen_new - lp - p.seqlen_q + i;  // L_b - seqlen_q + i
  if (!ok || pos < 0) {
    T* el = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int u = 0; u < kVec; ++u) el[u] = round_to_dtype<T>(__longlong_as_double(0x7ff8000000000000LL));
  } else if (e0 < p.rotary_dim) {
    rotate<T, kVec>(p, x, e0, pos, raw);
  }
}

// 5 CTAs of 256 threads an SM: at most 48 registers. The copy is bound by memory and wants the
// warps: at 52 registers (bf16, after round_to_odd_float lost its branches) 4 CTAs fit, and the
// standalone append fell from 0.86 to 0.80 of a device copy (H200; docs/perf.md, session 33).
template <typename T, int kVec>
__global__ void __launch_bounds__(256, 5) append_kernel(const __grid_constant__ AppendParams p) {
  using V = typename VecOf<T, kVec>::type;
  // The decode kernel after a fused append is launched as this kernel's dependent (decode.cu): its
  // CTAs may start now and run their prologue; they wait for this kernel's writes before reading.
  ptx::grid_dependents_launch();
  // 32-bit index math (the host checks that every vector index fits an int), its divisions by
  // FastDiv (above): they were the costliest instructions of this kernel.
  const int total = (p.kv_rows + p.q_rows) * p.vecs_per_row;
  for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
    int vec;
    int row = p.vecs_div.divmod(idx, &vec);
    const int e0 = vec * kVec;
    if (row < p.kv_rows) {  // the K and the V vector of (b, t, h): one index computation for both
      int h, t;
      const int b = p.seqlen_new_div.divmod(p.heads_kv_div.divmod(row, &h), &t);
      int64_t len, lp;
      if (!sequence_ok(p, b, &len, &lp)) continue;  // nothing of this sequence is written
      const int64_t slot = len + t;
      int64_t block, within;
      if (!append_slot_place(p, b, slot, &block, &within)) continue;
      const T* ks = static_cast<const T*>(p.k_new) + b * p.kn_batch_stride + int64_t(t) * p.kn_row_stride +
                    int64_t(h) * p.kn_head_stride;
      const T* vs = static_cast<const T*>(p.v_new) + b * p.vn_batch_stride + int64_t(t) * p.vn_row_stride +
                    int64_t(h) * p.vn_head_stride;
      V kraw = *reinterpret_cast<const V*>(ks + e0);
      const V vraw = *reinterpret_cast<const V*>(vs + e0);
      if (e0 < p.rotary_dim) rotate<T, kVec>(p, ks, e0, slot - lp, kraw);
      T* kd = static_cast<T*>(p.k_cache) + block * p.k_batch_stride + within * p.k_row_stride + int64_t(h) * p.k_head_stride;
      T* vd = static_cast<T*>(p.v_cache) + block * p.v_batch_stride + within * p.v_row_stride + int64_t(h) * p.v_head_stride;
      *reinterpret_cast<V*>(kd + e0) = kraw;
      *reinterpret_cast<V*>(vd + e0) = vraw;
    } else {
      row -= p.kv_rows;  // query row (b, i, h)
      int h, i;
      const int b = p.seqlen_q_div.divmod(p.heads_q_div.divmod(row, &h), &i);
      const T* src = static_cast<const T*>(p.q) + b * p.q_batch_stride + int64_t(i) * p.q_row_stride +
                     int64_t(h) * p.q_head_stride;
      T* out = static_cast<T*>(p.q_rot) + int64_t(row) * p.head_dim;
      V raw = *reinterpret_cast<const V*>(src + e0);
      rotate_query<T, kVec>(p, b, i, src, e0, raw);
      *reinterpret_cast<V*>(out + e0) = raw;
    }
  }
}

}  // namespace decode
}  // namespace flashlab
