// src/cpu/kvcache_reference.cpp — the float64 reference of the KV-cache path (docs/kvcache.md).
//
// 1. append: k_new (rotated at positions cache_seqlens - leftpad + t) and v_new are rounded to
//    dtype and stored at slots cache_seqlens[b] + t (through the page table or cache_batch_idx).
// 2. per (sequence, query head): gather the L attended keys (slots leftpad .. leftpad + L - 1) and
//    the query (rotated at positions L - seqlen_q + i) into doubles; each split computes a partial
//    (O, LSE) over its keys with mask.h's visible_keys, sink_keys (StreamingLLM sink tokens: the
//    first keys after leftpad) and modify_score, and combine_row merges them, with the attention
//    sink of head h (if any) as one more partial (lse = sink, O = 0).
//    Slots outside the keys are never read, so stale or NaN data cannot leak.
#include "cpu/kvcache_reference.h"

#include <algorithm>
#include <vector>

#include <omp.h>

#include "cpu/reference_io.h"
#include "flashlab/mask.h"

namespace flashlab {
namespace detail {
namespace kv {
namespace {
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

double load(DType dt, const void* base, int64_t off) {
  return load_as_float(dt, static_cast<const char*>(base) + off * dtype_size(dt));
}
}  // namespace

std::vector<std::pair<int64_t, int64_t>> split_plan(const KvCacheParams& p, int64_t L) {
  int64_t size;
  if (p.split_size > 0) {
    size = p.split_size;
  } else {
    int64_t n = p.num_splits;
    if (n == 0) n = std::min<int64_t>(16, (L + 127) / 128);  // auto: about 128 keys per split
    if (n < 1) n = 1;
    size = std::max<int64_t>(1, (L + n - 1) / n);
  }
  std::vector<std::pair<int64_t, int64_t>> plan;
  for (int64_t a = 0; a < L; a += size) plan.emplace_back(a, std::min(L, a + size));
  if (plan.empty()) plan.emplace_back(0, 0);
  return plan;
}

void apply_rotary(const KvCacheParams& p, int64_t pos, double* x) {
  const int64_t half = p.rotary_dim / 2, es = dtype_size(p.rotary_dtype);
  const char* cos = static_cast<const char*>(p.rotary_cos);
  const char* sin = static_cast<const char*>(p.rotary_sin);
  for (int64_t i = 0; i < half; ++i) {
    const double c = load_as_float(p.rotary_dtype, cos + (pos * half + i) * es);
    const double s = load_as_float(p.rotary_dtype, sin + (pos * half + i) * es);
    const int64_t i0 = p.rotary_style == RotaryStyle::kInterleaved ? 2 * i : i;
    const int64_t i1 = p.rotary_style == RotaryStyle::kInterleaved ? 2 * i + 1 : i + half;
    const double x0 = x[i0], x1 = x[i1];
    x[i0] = x0 * c - x1 * s;
    x[i1] = x0 * s + x1 * c;
  }
}

void append(const KvCacheParams& p) {
  if (p.k_new.ptr == nullptr || p.seqlen_new == 0) return;
  const int64_t d = p.head_dim, es = dtype_size(p.dtype);
  std::vector<double> x(d);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t t = 0; t < p.seqlen_new; ++t)
      for (int64_t h = 0; h < p.heads_kv; ++h) {
        const int64_t slot = p.cache_seqlens[b] + t;
        const TensorRef* src[2] = {&p.k_new, &p.v_new};
        const MutTensorRef* dst[2] = {&p.k_cache, &p.v_cache};
        for (int w = 0; w < 2; ++w) {
          const int64_t so = b * src[w]->batch_stride + t * src[w]->row_stride + h * src[w]->head_stride;
          for (int64_t e = 0; e < d; ++e) x[e] = load(p.dtype, src[w]->ptr, so + e);
          if (w == 0 && p.rotary_dim > 0) apply_rotary(p, slot - leftpad(p, b), x.data());
          char* out = static_cast<char*>(dst[w]->ptr) + slot_offset(p, *dst[w], b, slot, h) * es;
          for (int64_t e = 0; e < d; ++e) ref::store_rounded(p.dtype, out + e * es, x[e]);
        }
      }
}

void attend_one(const KvCacheParams& p, int64_t b, int64_t h, double* out, double* lse) {
  const int64_t d = p.head_dim, sq = p.seqlen_q, L = attended_length(p, b), lp = leftpad(p, b);
  const int64_t hk = h / (p.heads_q / p.heads_kv);
  std::vector<double> q(sq * d), k(L * d), v(L * d);
  for (int64_t i = 0; i < sq; ++i) {
    const int64_t off = b * p.q.batch_stride + i * p.q.row_stride + h * p.q.head_stride;
    for (int64_t e = 0; e < d; ++e) q[i * d + e] = load(p.dtype, p.q.ptr, off + e);
    if (p.rotary_dim > 0) {
      apply_rotary(p, L - sq + i, &q[i * d]);
      for (int64_t e = 0; e < d; ++e) {  // rounded to dtype, as a kernel storing it would
        char buf[8];
        ref::store_rounded(p.dtype, buf, q[i * d + e]);
        q[i * d + e] = load_as_float(p.dtype, buf);
      }
    }
  }
  for (int64_t j = 0; j < L; ++j)
    for (int64_t e = 0; e < d; ++e) {
      k[j * d + e] = load(p.dtype, p.k_cache.ptr, slot_offset(p, p.k_cache, b, lp + j, hk) + e);
      v[j * d + e] = load(p.dtype, p.v_cache.ptr, slot_offset(p, p.v_cache, b, lp + j, hk) + e);
    }

  AttentionConfig c = p;
  c.causal_align = CausalAlign::kBottomRight;
  const RowMask mask = make_row_mask(c, sq, L);
  const double scale = p.softmax_scale, softcap = p.softcap > 0.0f ? p.softcap : 0.0;
  const double slope = p.alibi_slopes ? p.alibi_slopes[b * p.alibi_batch_stride + h] : 0.0;
  const auto plan = split_plan(p, L);
  const int64_t n = static_cast<int64_t>(plan.size());
  std::vector<double> o_part(n * d), lse_part(n), s(L);
  for (int64_t i = 0; i < sq; ++i) {
    int64_t lo, hi;
    visible_keys(mask, i, &lo, &hi);
    const int64_t sinks = sink_keys(mask, i);  // keys [0, sinks) too (StreamingLLM sink tokens)
    for (int64_t sp = 0; sp < n; ++sp) {
      // The split's share of the row's visible keys: of the sink keys, then of the window (the
      // two are disjoint: sinks <= lo).
      const int64_t first = plan[sp].first, last = plan[sp].second - 1;
      const std::pair<int64_t, int64_t> parts[2] = {{first, std::min(sinks - 1, last)},
                                                    {std::max(lo, first), std::min(hi, last)}};
      double* o = &o_part[sp * d];
      std::fill(o, o + d, 0.0);
      lse_part[sp] = kNegInf;
      if (parts[0].second < parts[0].first && parts[1].second < parts[1].first) continue;
      double m = kNegInf;
      for (const auto& [a, z] : parts)
        for (int64_t j = a; j <= z; ++j) {
          double acc = 0.0;
          for (int64_t e = 0; e < d; ++e) acc += q[i * d + e] * k[j * d + e];
          s[j] = modify_score<double>(scale * acc, softcap, slope, i, j, mask.shift);
          m = std::max(m, s[j]);
        }
      double sum = 0.0;
      for (const auto& [a, z] : parts)
        for (int64_t j = a; j <= z; ++j) {
          const double w = std::exp(s[j] - m);
          sum += w;
          for (int64_t e = 0; e < d; ++e) o[e] += w * v[j * d + e];
        }
      for (int64_t e = 0; e < d; ++e) o[e] /= sum;
      lse_part[sp] = m + std::log(sum);
    }
    const double sink = p.sink_logits ? static_cast<double>(p.sink_logits[h]) : kNegInf;
    combine_row(n, lse_part.data(), [&](int64_t sp) { return &o_part[sp * d]; }, d, &out[i * d], &lse[i], sink);
  }
}

Status reference_kvcache(const KvCacheParams& p, bool attend) {
  append(p);
  if (!attend) return Status::Ok();
  const int64_t items = p.batch * p.heads_q, d = p.head_dim, es = dtype_size(p.dtype);
  const int threads = ref::thread_count(p.num_threads, items);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t b = item / p.heads_q, h = item % p.heads_q;
    std::vector<double> out(p.seqlen_q * d), lse(p.seqlen_q);
    attend_one(p, b, h, out.data(), lse.data());
    for (int64_t i = 0; i < p.seqlen_q; ++i) {
      char* row = static_cast<char*>(p.out.ptr) +
                  (b * p.out.batch_stride + i * p.out.row_stride + h * p.out.head_stride) * es;
      for (int64_t e = 0; e < d; ++e) ref::store_rounded(p.dtype, row + e * es, out[i * d + e]);
      if (p.lse) p.lse[b * p.lse_batch_stride + h * p.lse_head_stride + i] = static_cast<float>(lse[i]);
    }
  }
  return Status::Ok();
}

Status reference_combine(const CombineParams& p) {
  const int64_t rows = p.batch * p.seqlen_q * p.heads, d = p.head_dim, es = dtype_size(p.dtype);
  const int threads = ref::thread_count(p.num_threads, rows);
#pragma omp parallel for num_threads(threads)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / (p.seqlen_q * p.heads), i = (r / p.heads) % p.seqlen_q, h = r % p.heads;
    std::vector<float> lse_s(p.num_splits);
    for (int64_t s = 0; s < p.num_splits; ++s)
      lse_s[s] = p.lse_partial[s * p.lse_partial_split_stride + b * p.lse_partial_batch_stride +
                               h * p.lse_partial_head_stride + i];
    std::vector<double> out(d);
    double lse;
    combine_row(
        p.num_splits, lse_s.data(),
        [&](int64_t s) {
          return p.out_partial + s * p.out_partial_split_stride + b * p.out_partial_batch_stride +
                 i * p.out_partial_row_stride + h * p.out_partial_head_stride;
        },
        d, out.data(), &lse);
    char* row = static_cast<char*>(p.out.ptr) + (b * p.out.batch_stride + i * p.out.row_stride + h * p.out.head_stride) * es;
    for (int64_t e = 0; e < d; ++e) ref::store_rounded(p.dtype, row + e * es, out[e]);
    if (p.lse) p.lse[b * p.lse_batch_stride + h * p.lse_head_stride + i] = static_cast<float>(lse);
  }
  return Status::Ok();
}

}  // namespace kv
}  // namespace detail
}  // namespace flashlab
