// src/cpu/reference_core.cpp — the float64 core of the reference backend (see reference_core.h).
//
// Loops run over each row's visible keys ([lo, hi] from mask.h, and sink tokens [0, s)), so the
// work is mask-aware, but nothing is tiled or fused: S and P are materialized in full, which is
// the point of a reference (and what the benchmark's peak-memory column shows).
#include "cpu/reference_core.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "flashlab/philox.h"

namespace flashlab {
namespace detail {
namespace ref {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Dot product of two head_dim vectors. The simd reduction lets the compiler vectorize; the order
// of the additions is then fixed by the binary, so results stay reproducible run to run.
double dot(const double* a, const double* b, int64_t n) {
  double acc = 0.0;
#pragma omp simd reduction(+ : acc)
  for (int64_t d = 0; d < n; ++d) acc += a[d] * b[d];
  return acc;
}

// y += alpha * x
void axpy(double* y, double alpha, const double* x, int64_t n) {
#pragma omp simd
  for (int64_t d = 0; d < n; ++d) y[d] += alpha * x[d];
}

}  // namespace

CoreProblem core_problem(const AttentionConfig& c, int64_t b, int64_t h, int64_t seqlen_q,
                         int64_t seqlen_k) {
  CoreProblem pb;
  pb.seqlen_q = seqlen_q;
  pb.seqlen_k = seqlen_k;
  pb.head_dim = c.head_dim;
  pb.scale = static_cast<double>(c.softmax_scale);
  pb.softcap = c.softcap > 0.0f ? static_cast<double>(c.softcap) : 0.0;
  pb.alibi_slope = c.alibi_slopes ? static_cast<double>(c.alibi_slopes[b * c.alibi_batch_stride + h]) : 0.0;
  if (c.sink_logits) pb.sink = static_cast<double>(c.sink_logits[h]);
  pb.mask = make_row_mask(c, seqlen_q, seqlen_k);
  if (c.dropout_p > 0.0f) {
    pb.dropout_p = static_cast<double>(c.dropout_p);
    pb.dropout_threshold = dropout_threshold(c.dropout_p);
    pb.dropout_seed = c.dropout_seed;
    pb.dropout_offset = c.dropout_offset;
  }
  pb.batch_index = b;
  pb.heads_q = c.heads_q;
  pb.head = h;
  return pb;
}

double dropout_factor(const CoreProblem& pb, int64_t i, int64_t j) {
  // A p below 2^-32 has threshold 0: every element is kept, but still scaled by 1/(1-p).
  if (pb.dropout_p == 0.0) return 1.0;
  const bool keep = dropout_keep(pb.dropout_seed, pb.dropout_offset, pb.dropout_threshold,
                                 pb.batch_index, pb.heads_q, pb.head, i, j);
  return keep ? 1.0 / (1.0 - pb.dropout_p) : 0.0;
}

void core_forward(const CoreProblem& pb, const double* q, const double* k, const double* v,
                  double* S, double* P, double* out, double* lse) {
  const int64_t Sq = pb.seqlen_q, Sk = pb.seqlen_k, D = pb.head_dim;
  for (int64_t i = 0; i < Sq; ++i) {
    const double* q_i = q + i * D;
    double* s_i = S + i * Sk;  // (Sk)
    double* p_i = P + i * Sk;  // (Sk)
    double* o_i = out + i * D;  // (D)
    int64_t lo, hi;
    visible_keys(pb.mask, i, &lo, &hi);
    const int64_t sinks = sink_keys(pb.mask, i);  // keys [0, sinks) too (StreamingLLM sink tokens)
    auto hidden = [&](int64_t j) { return (j < lo || j > hi) && j >= sinks; };

    // S_i = modify(scale · q_i · Kᵀ), -inf where hidden; m = the row max for a stable softmax
    // (the sink counts as one more score: -inf when there is none).
    double m = pb.sink;
    for (int64_t j = 0; j < Sk; ++j) {
      if (hidden(j)) {
        s_i[j] = kNegInf;
        continue;
      }
      s_i[j] = modify_score<double>(pb.scale * dot(q_i, k + j * D, D), pb.softcap, pb.alibi_slope,
                                    i, j, pb.mask.shift);
      m = std::max(m, s_i[j]);
    }
    std::fill(o_i, o_i + D, 0.0);
    if (hi < lo && sinks == 0) {  // no visible key: O = 0, LSE = sink (-inf without), and P = 0: no gradient to q, k, v
      std::fill(p_i, p_i + Sk, 0.0);
      if (lse) lse[i] = pb.sink;
      continue;
    }

    // P_i = exp(S_i - m) / l with l = exp(sink - m) + Σ exp(S_i - m) >= 1 (the max term is 1).
    double l = pb.sink == kNegInf ? 0.0 : std::exp(pb.sink - m);
    for (int64_t j = 0; j < Sk; ++j) {
      p_i[j] = hidden(j) ? 0.0 : std::exp(s_i[j] - m);
      l += p_i[j];
    }
    for (int64_t j = 0; j < Sk; ++j) p_i[j] /= l;  // 0 where hidden
    if (lse) lse[i] = m + std::log(l);

    // O_i = Σ_j P_ij Z_ij v_j: dropout scales the kept probabilities and zeroes the rest, but the
    // LSE above stays that of the undropped softmax (what the backward pass and kernels expect).
    for (int64_t j = 0; j < Sk; ++j) {
      if (hidden(j)) continue;
      const double w = p_i[j] * dropout_factor(pb, i, j);
      if (w != 0.0) axpy(o_i, w, v + j * D, D);
    }
  }
}

void core_backward(const CoreProblem& pb, const double* q, const double* k, const double* v,
                   const double* out, const double* dout, const double* P, double* dS, double* dq,
                   double* dk, double* dv) {
  const int64_t Sq = pb.seqlen_q, Sk = pb.seqlen_k, D = pb.head_dim;
  for (int64_t i = 0; i < Sq; ++i) {
    const double* q_i = q + i * D;
    const double* do_i = dout + i * D;
    const double* p_i = P + i * Sk;  // (Sk)
    double* ds_i = dS + i * Sk;      // (Sk)
    double* dq_i = dq + i * D;       // (D)
    std::fill(ds_i, ds_i + Sk, 0.0);
    std::fill(dq_i, dq_i + D, 0.0);
    int64_t lo, hi;
    visible_keys(pb.mask, i, &lo, &hi);
    const int64_t sinks = sink_keys(pb.mask, i);  // keys [0, sinks) too (StreamingLLM sink tokens)
    if (hi < lo && sinks == 0) continue;  // a row that sees nothing has out = 0 whatever q is: dq = 0

    // D_i = rowsum(dO ∘ O) = Σ_j P_ij dP_ij: the softmax Jacobian's correction term.
    const double D_i = dot(do_i, out + i * D, D);
    for (int64_t j = 0; j < Sk; ++j) {
      if ((j < lo || j > hi) && j >= sinks) continue;
      const double* k_j = k + j * D;
      const double* v_j = v + j * D;
      const double z = dropout_factor(pb, i, j);  // the same mask as the forward pass
      // dV_j += (P ∘ Z)_ij dO_i
      if (p_i[j] * z != 0.0) axpy(dv + j * D, p_i[j] * z, do_i, D);
      // dP_ij = Z_ij (dO_i · v_j): O depends on P only through P ∘ Z.
      const double dp = z == 0.0 ? 0.0 : z * dot(do_i, v_j, D);
      // dS_ij = P_ij (dP_ij - D_i): the softmax backward.
      double ds = p_i[j] * (dp - D_i);
      // Chain rule through softcap: d/dx [c·tanh(x/c)] = sech²(x/c). sech² (1/cosh²) rather than
      // 1 - tanh² keeps full relative precision where tanh saturates. ALiBi is additive: factor 1.
      if (pb.softcap > 0.0) {
        const double ch = std::cosh(pb.scale * dot(q_i, k_j, D) / pb.softcap);
        ds /= ch * ch;
      }
      ds_i[j] = ds;
      // raw = scale · q_i · k_j, so dQ_i += scale dS_ij k_j and dK_j += scale dS_ij q_i.
      axpy(dq_i, pb.scale * ds, k_j, D);
      axpy(dk + j * D, pb.scale * ds, q_i, D);
    }
  }
}

double core_dsink(const CoreProblem& pb, const double* out, const double* dout, const double* lse) {
  if (pb.sink == kNegInf) return 0.0;
  // LSE_i depends on the sink with dLSE_i/dsink = p_i,sink = exp(sink − LSE_i), so every
  // P_ij = exp(S_ij − LSE_i) moves by −P_ij · p_i,sink and
  //   dL/dsink = Σ_i Σ_j dP_ij · (−P_ij p_i,sink) = −Σ_i p_i,sink · D_i,  D_i = Σ_j P_ij dP_ij = dO_i · O_i
  // (with dropout too: dP_ij = Z_ij dO_i · v_j and O_i = Σ_j P_ij Z_ij v_j).
  double acc = 0.0;
  for (int64_t i = 0; i < pb.seqlen_q; ++i) {
    const double D_i = dot(dout + i * pb.head_dim, out + i * pb.head_dim, pb.head_dim);
    if (D_i != 0.0) acc -= std::exp(pb.sink - lse[i]) * D_i;
  }
  return acc;
}

}  // namespace ref
}  // namespace detail
}  // namespace flashlab
