// src/common/problem.h — addressing helpers shared by the CPU backends (host only).
//
// A call covers `batch` independent sequences. For fixed-length batches every sequence has
// seqlen_q queries and seqlen_k keys; for variable-length batches (cu_seqlens set) sequence b holds
// rows [cu_seqlens[b], cu_seqlens[b+1]) of the packed tensors.
#pragma once

#include <cstdint>

#include "flashlab/params.h"

namespace flashlab {
namespace detail {

struct SeqBounds {
  int64_t q_begin = 0;  // first packed row (0 for fixed-length batches)
  int64_t q_len = 0;
  int64_t k_begin = 0;
  int64_t k_len = 0;
};

inline bool is_varlen(const AttentionConfig& c) { return c.cu_seqlens_q != nullptr; }

// Host-only: reads cu_seqlens, which must be host memory here.
inline SeqBounds seq_bounds(const AttentionConfig& c, int64_t b) {
  SeqBounds s;
  if (is_varlen(c)) {
    s.q_begin = c.cu_seqlens_q[b];
    s.q_len = c.cu_seqlens_q[b + 1] - c.cu_seqlens_q[b];
    s.k_begin = c.cu_seqlens_k[b];
    s.k_len = c.cu_seqlens_k[b + 1] - c.cu_seqlens_k[b];
  } else {
    s.q_len = c.seqlen_q;
    s.k_len = c.seqlen_k;
  }
  return s;
}

// Element offset of (sequence b, row `row` inside it, head) in a tensor with these strides.
inline int64_t elem_offset(const AttentionConfig& c, int64_t batch_stride, int64_t row_stride,
                           int64_t head_stride, int64_t b, int64_t begin, int64_t row, int64_t head) {
  const int64_t base = is_varlen(c) ? (begin + row) * row_stride : b * batch_stride + row * row_stride;
  return base + head * head_stride;
}

// Element offset of LSE entry (b, head, row).
inline int64_t lse_offset(const AttentionConfig& c, int64_t lse_batch_stride, int64_t lse_head_stride,
                          int64_t b, int64_t q_begin, int64_t row, int64_t head) {
  return is_varlen(c) ? head * lse_head_stride + q_begin + row
                      : b * lse_batch_stride + head * lse_head_stride + row;
}

// The kv head that query head h reads (GQA/MQA).
inline int64_t kv_head(const AttentionConfig& c, int64_t h) { return h / (c.heads_q / c.heads_kv); }

}  // namespace detail
}  // namespace flashlab
