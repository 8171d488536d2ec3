// flashlab/mask.h — which keys a query row sees, and how scores are modified. Host and device.
//
// Causal masking and the sliding window are both interval constraints on the key index, so every
// query row sees one contiguous range of keys [lo, hi] (empty when hi < lo). StreamingLLM sink
// tokens add a second range before it, [0, sink_keys(m, i)) (docs/design/sink-tokens.md; the CPU
// backends, the CUDA decode kernels, cuda_sm80's training kernels and cuda_sm90's use it). All
// backends use these functions, so they cannot disagree on the mask.
#pragma once

#include <cmath>
#include <cstdint>

#include "flashlab/config.h"
#include "flashlab/params.h"

namespace flashlab {

// The mask of one (batch, head) problem, with sizes of that sequence pair.
struct RowMask {
  int64_t seqlen_q = 0;
  int64_t seqlen_k = 0;
  int64_t shift = 0;   // diagonal offset: seqlen_k - seqlen_q (bottom-right) or 0 (top-left)
  int64_t left = -1;   // keys visible left of the diagonal; -1 = unbounded
  int64_t right = -1;  // keys visible right of the diagonal; -1 = unbounded (causal: 0)
  int64_t sink = 0;    // the first `sink` keys: visible left of the window (StreamingLLM)
};

FLASHLAB_HD RowMask make_row_mask(const AttentionConfig& c, int64_t seqlen_q, int64_t seqlen_k) {
  RowMask m;
  m.seqlen_q = seqlen_q;
  m.seqlen_k = seqlen_k;
  m.shift = c.causal_align == CausalAlign::kBottomRight ? seqlen_k - seqlen_q : 0;
  m.left = c.window_left;
  m.right = c.window_right;
  if (c.causal) m.right = 0;  // causal == no key right of the diagonal (window_right is ignored)
  m.sink = c.sink_tokens;
  return m;
}

// Visible key range [*lo, *hi] of query row i (empty when *hi < *lo).
FLASHLAB_HD void visible_keys(const RowMask& m, int64_t i, int64_t* lo, int64_t* hi) {
  int64_t a = 0, b = m.seqlen_k - 1;
  const int64_t d = i + m.shift;  // the key on this row's diagonal
  if (m.left >= 0 && d - m.left > a) a = d - m.left;
  if (m.right >= 0 && d + m.right < b) b = d + m.right;
  *lo = a;
  *hi = b;
}

// Whether sink tokens change a mask at all: only beside a left window (without one every row's
// interval starts at key 0, and [0, s) lies inside it). Callers of any params struct with these two
// fields ask here before picking a sink-token kernel, split or refusal.
template <typename Params>
FLASHLAB_HD bool sink_tokens_change_mask(const Params& p) {
  return p.sink_tokens > 0 && p.window_left >= 0;
}

// Sink tokens of query row i: keys [0, s) visible besides [lo, hi], with s = min(sink, lo, hi + 1)
// (left of the window only, never right of the row's right bound). 0 without sink tokens.
FLASHLAB_HD int64_t sink_keys(const RowMask& m, int64_t i) {
  if (m.sink <= 0) return 0;
  int64_t lo, hi;
  visible_keys(m, i, &lo, &hi);
  int64_t s = m.sink < lo ? m.sink : lo;
  if (hi + 1 < s) s = hi + 1;
  return s > 0 ? s : 0;
}

// Whether key j is in a row's visible set [lo, hi] ∪ [0, s), given the row's visible_keys and
// sink_keys. For callers that keep each row's bounds (cpu_flash's tiles hold them as int32).
template <typename I>
FLASHLAB_HD bool in_visible_set(I j, I lo, I hi, I s) {
  return (j >= lo && j <= hi) || (j >= 0 && j < s);
}

FLASHLAB_HD bool key_visible(const RowMask& m, int64_t i, int64_t j) {
  int64_t lo, hi;
  visible_keys(m, i, &lo, &hi);
  return in_visible_set(j, lo, hi, sink_keys(m, i));
}

// Number of visible (query, key) pairs: the mask-aware work count used by flops().
FLASHLAB_HD int64_t visible_pairs(const RowMask& m) {
  int64_t n = 0;
  for (int64_t i = 0; i < m.seqlen_q; ++i) {
    int64_t lo, hi;
    visible_keys(m, i, &lo, &hi);
    if (hi >= lo) n += hi - lo + 1;
    n += sink_keys(m, i);
  }
  return n;
}

// Score modification between S = scale * Q·Kᵀ and the softmax (softcap, then ALiBi).
// `alibi_slope` is 0 when ALiBi is off. Returns the modified score.
template <typename T>
FLASHLAB_HD T modify_score(T s, T softcap, T alibi_slope, int64_t i, int64_t j, int64_t shift) {
  if (softcap > T(0)) s = softcap * tanh(s / softcap);
  if (alibi_slope != T(0)) {
    int64_t dist = i + shift - j;
    if (dist < 0) dist = -dist;
    s -= alibi_slope * static_cast<T>(dist);
  }
  return s;
}

}  // namespace flashlab
