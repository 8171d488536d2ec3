// src/cpu/reference_io.h — what the reference's API wrappers share: gathering one head of a
// strided tensor of any dtype into a dense float64 array, storing float64 results back with a
// single correct rounding, sizing the float64 scratch, and the OpenMP thread count.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include <omp.h>

#include "common/problem.h"
#include "flashlab/dtype.h"
#include "flashlab/params.h"

namespace flashlab {
namespace detail {
namespace ref {

// Rounds a double to `dtype` exactly once (round to nearest even), as if there were no float in
// between. A plain double -> float -> bf16 conversion can round twice and land one ulp off when
// the float lands exactly on a bf16 tie. Rounding the first step to ODD instead (keep the float
// below/above x whose last bit is 1 when x is inexact) is the classic fix: float has 13+ bits more
// than fp16/bf16, so the second rounding then sees the true side of every tie.
inline void store_rounded(DType dtype, void* dst, double x) {
  float f = static_cast<float>(x);
  if (dtype != DType::kFloat32 && std::isfinite(f) && static_cast<double>(f) != x &&
      (float_to_bits(f) & 1u) == 0u) {
    f = std::nextafter(f, x > static_cast<double>(f) ? std::numeric_limits<float>::infinity()
                                                     : -std::numeric_limits<float>::infinity());
  }
  store_from_float(dtype, dst, f);
}

// Rows [0, rows) of (sequence b, head) of tensor t -> dst, dense (rows, head_dim).
template <typename Ref>
void load_rows(const AttentionConfig& c, const Ref& t, int64_t b, int64_t begin, int64_t rows,
               int64_t head, double* dst) {
  const int64_t es = dtype_size(c.dtype);
  const char* base = static_cast<const char*>(t.ptr);
  for (int64_t r = 0; r < rows; ++r) {
    const char* row = base + elem_offset(c, t.batch_stride, t.row_stride, t.head_stride, b, begin, r, head) * es;
    for (int64_t d = 0; d < c.head_dim; ++d)
      dst[r * c.head_dim + d] = load_as_float(c.dtype, row + d * t.dim_stride * es);
  }
}

// Dense (rows, head_dim) src -> rows [0, rows) of (sequence b, head) of tensor t, rounded.
inline void store_rows(const AttentionConfig& c, const MutTensorRef& t, int64_t b, int64_t begin,
                       int64_t rows, int64_t head, const double* src) {
  const int64_t es = dtype_size(c.dtype);
  char* base = static_cast<char*>(t.ptr);
  for (int64_t r = 0; r < rows; ++r) {
    char* row = base + elem_offset(c, t.batch_stride, t.row_stride, t.head_stride, b, begin, r, head) * es;
    for (int64_t d = 0; d < c.head_dim; ++d)
      store_rounded(c.dtype, row + d * t.dim_stride * es, src[r * c.head_dim + d]);
  }
}

// The longest query and key sequence actually present (cu_seqlens are host memory here).
inline void longest_sequences(const AttentionConfig& c, int64_t* max_q, int64_t* max_k) {
  *max_q = 0;
  *max_k = 0;
  for (int64_t b = 0; b < (is_varlen(c) ? c.batch : 1); ++b) {
    const SeqBounds s = seq_bounds(c, b);
    if (s.q_len > *max_q) *max_q = s.q_len;
    if (s.k_len > *max_k) *max_k = s.k_len;
  }
}

// a * b * sizeof(double) fits size_t (so a Scratch<double>(a * b) can be attempted).
inline bool doubles_fit(int64_t a, int64_t b) {
  const uint64_t limit = std::numeric_limits<size_t>::max() / sizeof(double) / 2;
  if (a <= 0 || b <= 0) return true;
  return static_cast<uint64_t>(a) <= limit / static_cast<uint64_t>(b);
}

// OpenMP threads for `items` independent work items: num_threads (0 = all), at most one per item.
inline int thread_count(int num_threads, int64_t items) {
  int64_t n = num_threads > 0 ? num_threads : omp_get_max_threads();
  if (n > items) n = items;
  return n < 1 ? 1 : static_cast<int>(n);
}

}  // namespace ref
}  // namespace detail
}  // namespace flashlab
