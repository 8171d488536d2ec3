// src/cuda/common/softmax.h — the online softmax state of the rows one thread holds.
//
// Per key block (S already scaled and masked by the score hook):
//   m' = max(m, rowmax S);  α = 2^((m - m')·c);  P = 2^(S·c - m'·c);  l = α·l + rowsum P;  O = α·O
// where c = scale_log2 folds the softmax scale and log2(e) into one FFMA per score. At the end
// O /= l and LSE = m·(c / log2 e) + ln l (natural log). A row that has seen only masked scores has
// m = -inf: its exponent base is taken as 0, so P = 2^(-inf) = 0 instead of the NaN of
// (-inf) - (-inf), l stays 0, and finalize() writes O = 0 and LSE = -inf.
// The row sums are per-thread partial sums; the quad reduction happens once, in finalize().
#pragma once

#include <cmath>

#include "cuda/common/math.h"

namespace flashlab {
namespace common {

template <int kRows>
struct OnlineSoftmax {
  float row_max[kRows];
  float row_sum[kRows];

  __device__ OnlineSoftmax() {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.0f;
    }
  }

  // s: (rows, cols) scores of one key block, overwritten with P = 2^(S·c - m'·c).
  // o: (rows, HDIM cols) the output accumulator, rescaled by α.
  template <typename TensorS, typename TensorO>
  __device__ void update(TensorS& s, TensorO& o, float scale_log2) {
    float alpha[kRows];
    update_stats(s, scale_log2, alpha);
    rescale(o, alpha);
  }

  // update() in two halves, for kernels that may touch O only later than S (sm90: P(n)·V(n) is
  // still in flight on the tensor cores while the softmax of block n + 1 runs; O is rescaled once
  // that product retired). update_stats: m, P, l and each row's α; rescale: O *= α.
  template <typename TensorS>
  __device__ void update_stats(TensorS& s, float scale_log2, float (&alpha)[kRows]) {
    static_assert(decltype(size<0>(s))::value == kRows, "one softmax state per accumulator row");
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float m = row_max[r];
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); ++c) m = fmaxf(m, s(r, c));
      m = quad_max(m);
      // The first block needs no special case: m = -inf gives α = 0 and O, l are still 0.
      const float m_scaled = m == -INFINITY ? 0.0f : m * scale_log2;
      alpha[r] = fast_exp2(row_max[r] * scale_log2 - m_scaled);
      row_max[r] = m;
      float sum = 0.0f;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); ++c) {
        const float p = fast_exp2(fmaf(s(r, c), scale_log2, -m_scaled));
        s(r, c) = p;
        sum += p;
      }
      row_sum[r] = row_sum[r] * alpha[r] + sum;
    }
  }
  template <typename TensorO>
  __device__ void rescale(TensorO& o, const float (&alpha)[kRows]) const {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      CUTE_UNROLL
      for (int c = 0; c < size<1>(o); ++c) o(r, c) *= alpha[r];
    }
  }

  // O /= l (times `out_scale`, the dropout 1/(1-p)); lse[r] = natural-log LSE of row r.
  // `score_scale` converts a row max into natural-log units: c / log2(e).
  //
  // sink: an attention sink's logit (natural-log units; −inf: none), a term e^sink in the
  // denominator with no value. With b = m·score_scale (the row max in natural-log units) the
  // denominator is l·e^b + e^sink; scaled by e^−mx, mx = max(b, sink), so neither exponent
  // overflows: O = O_acc·e^(b−mx) / (l·e^(b−mx) + e^(sink−mx)), LSE = mx + log(that sum). A row
  // without a visible key gets O = 0 and LSE = sink.
  template <typename TensorO>
  __device__ void finalize(TensorO& o, float score_scale, float out_scale, float (&lse)[kRows],
                           float sink = -INFINITY) {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const float l = quad_sum(row_sum[r]);
      const bool empty = l == 0.0f;  // no visible key; a NaN input stays NaN in O and LSE
      float inv;
      if (sink == -INFINITY) {
        inv = empty ? 0.0f : out_scale / l;
        lse[r] = empty ? -INFINITY : row_max[r] * score_scale + logf(l);
      } else if (empty) {
        inv = 0.0f;
        lse[r] = sink;
      } else {
        const float b = row_max[r] * score_scale;
        const float mx = fmaxf(b, sink);
        // exp2f, not expf: expf's slow path for large arguments needs a stack frame (a spill in
        // ptxas's report, which fails the sm90 build)
        const float eb = exp2f((b - mx) * kLog2e);
        const float denom = l * eb + exp2f((sink - mx) * kLog2e);
        inv = out_scale * eb / denom;
        lse[r] = mx + logf(denom);
      }
      CUTE_UNROLL
      for (int c = 0; c < size<1>(o); ++c) o(r, c) *= inv;
    }
  }
};

}  // namespace common
}  // namespace flashlab
