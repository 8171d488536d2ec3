// src/cpu/kvcache_reference.h — the float64 reference of the KV-cache path (docs/kvcache.md).
// Host only: reads cache_seqlens, leftpad, cache_batch_idx and block_table directly. The pieces
// are exposed (namespace flashlab::detail::kv) so tests can check the float64 results directly.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "flashlab/kvcache.h"
#include "flashlab/status.h"

namespace flashlab {
namespace detail {
namespace kv {

inline int64_t leftpad(const KvCacheParams& p, int64_t b) { return p.cache_leftpad ? p.cache_leftpad[b] : 0; }
// Number of keys of sequence b after the append.
inline int64_t attended_length(const KvCacheParams& p, int64_t b) {
  return static_cast<int64_t>(p.cache_seqlens[b]) + p.seqlen_new - leftpad(p, b);
}
// Slots per sequence.
inline int64_t capacity(const KvCacheParams& p) {
  return p.block_table ? p.max_pages * p.page_size : p.max_seqlen_cache;
}
// Element offset of physical slot `slot` of sequence b, kv head `head`, in cache tensor t.
inline int64_t slot_offset(const KvCacheParams& p, const MutTensorRef& t, int64_t b, int64_t slot, int64_t head) {
  if (p.block_table) {
    const int64_t bts = p.block_table_batch_stride ? p.block_table_batch_stride : p.max_pages;
    const int64_t page = p.block_table[b * bts + slot / p.page_size];
    return page * t.batch_stride + (slot % p.page_size) * t.row_stride + head * t.head_stride;
  }
  const int64_t row = p.cache_batch_idx ? p.cache_batch_idx[b] : b;
  return row * t.batch_stride + slot * t.row_stride + head * t.head_stride;
}

// Key ranges [begin, end) (attended-key coordinates) of the splits of a sequence of L keys.
std::vector<std::pair<int64_t, int64_t>> split_plan(const KvCacheParams& p, int64_t L);

// Rotates x (head_dim values) in place at position pos (rotary must be on).
void apply_rotary(const KvCacheParams& p, int64_t pos, double* x);

// Writes k_new (rotated) and v_new into the cache. Arguments must be valid.
void append(const KvCacheParams& p);

// Attention of (sequence b, query head h) over its attended keys (read from the cache, so call
// after append), split by split_plan and merged LSE-exactly: out (seqlen_q, head_dim), lse
// (seqlen_q). softmax_scale must be finite.
void attend_one(const KvCacheParams& p, int64_t b, int64_t h, double* out, double* lse);

// The LSE-exact merge of n partial results (docs/kvcache.md). out_s(s) -> pointer to O_s.
// `sink` (an attention sink's logit, -inf = none) joins as one more partial with lse = sink and
// O = 0: it adds to the denominator only, so every split count gives the same math.
template <typename T, typename GetO>
void combine_row(int64_t n, const T* lse_s, GetO out_s, int64_t d, double* out, double* lse,
                 double sink = -std::numeric_limits<double>::infinity()) {
  const double ninf = -std::numeric_limits<double>::infinity();
  double m = sink;
  for (int64_t s = 0; s < n; ++s) {
    if (std::isnan(static_cast<double>(lse_s[s]))) {  // a NaN partial makes the row NaN (never dropped)
      for (int64_t e = 0; e < d; ++e) out[e] = std::numeric_limits<double>::quiet_NaN();
      *lse = std::numeric_limits<double>::quiet_NaN();
      return;
    }
    m = std::max(m, static_cast<double>(lse_s[s]));
  }
  for (int64_t e = 0; e < d; ++e) out[e] = 0.0;
  if (m == ninf) {
    *lse = ninf;
    return;
  }
  double sum = sink == ninf ? 0.0 : std::exp(sink - m);
  for (int64_t s = 0; s < n; ++s) {
    if (static_cast<double>(lse_s[s]) == ninf) continue;
    const double w = std::exp(static_cast<double>(lse_s[s]) - m);
    sum += w;
    const T* o = out_s(s);
    for (int64_t e = 0; e < d; ++e) out[e] += w * static_cast<double>(o[e]);
  }
  for (int64_t e = 0; e < d; ++e) out[e] /= sum;
  *lse = m + std::log(sum);
}

Status reference_kvcache(const KvCacheParams& p, bool attend);
Status reference_combine(const CombineParams& p);

}  // namespace kv
}  // namespace detail
}  // namespace flashlab
