// src/cpu/reference_core.h — the float64 attention oracle for ONE (batch, head) problem.
//
// Everything here works on plain, dense, row-major double arrays of one sequence pair:
//   q, out, dout, dq : (seqlen_q, head_dim)      k, v, dk, dv : (seqlen_k, head_dim)
//   S, P, dS         : (seqlen_q, seqlen_k)      lse          : (seqlen_q)
// so tests can run it directly (closed forms, finite differences in float64) and the API wrappers
// (reference.cpp, reference_backward.cpp) only have to gather strided tensors of any dtype into
// doubles, call the core per (batch, head), and round the results back to the dtype.
//
// The algorithm is the textbook one, written for reading, not speed:
//   S = modify(scale · Q Kᵀ)  (softcap, then ALiBi; -inf outside the mask)
//   P = softmax(S) row by row          LSE = log Σ_j exp(S_ij)        (natural log)
//   O = (P ∘ Z) V                      Z_ij = keep_ij / (1 - p)  (dropout; Z = 1 without)
// A row that sees no key gets O = 0 and LSE = -inf (never NaN).
// Attention sink (pb.sink, -inf = none): one more term exp(sink) in Σ, with no value, so
//   LSE = log(exp(sink) + Σ_j exp(S_ij)) and a row that sees no key gets O = 0, LSE = sink.
#pragma once

#include <cstdint>
#include <limits>

#include "flashlab/mask.h"
#include "flashlab/params.h"

namespace flashlab {
namespace detail {
namespace ref {

// One (batch, head) problem: sizes, score modifications, mask and dropout key, all resolved.
struct CoreProblem {
  int64_t seqlen_q = 0;  // of this sequence (not the batch maximum)
  int64_t seqlen_k = 0;
  int64_t head_dim = 0;
  double scale = 1.0;        // softmax_scale, already resolved (finite)
  double softcap = 0.0;      // > 0: s = softcap * tanh(s / softcap)
  double alibi_slope = 0.0;  // 0: ALiBi off
  double sink = -std::numeric_limits<double>::infinity();  // sink logit of this head; -inf: none
  RowMask mask;              // which keys each row sees (mask.h), built for these seqlens

  // Dropout: keep-mask from philox.h's dropout_keep at (batch, head, row, col) of this problem.
  double dropout_p = 0.0;           // 0: dropout off
  uint32_t dropout_threshold = 0u;  // dropout_threshold(p), an integer so all backends agree
  uint64_t dropout_seed = 0;
  uint64_t dropout_offset = 0;
  int64_t batch_index = 0;  // the sequence index b (also for variable-length batches)
  int64_t heads_q = 1;
  int64_t head = 0;  // the query head h
};

// The CoreProblem of (sequence b, query head h) with these sequence lengths. `c.softmax_scale`
// must be finite; ALiBi reads c.alibi_slopes[b * c.alibi_batch_stride + h] when set.
CoreProblem core_problem(const AttentionConfig& c, int64_t b, int64_t h, int64_t seqlen_q,
                         int64_t seqlen_k);

// The dropout multiplier Z_ij of P_ij: 0 (dropped) or 1/(1-p) (kept); exactly 1 without dropout.
double dropout_factor(const CoreProblem& pb, int64_t i, int64_t j);

// Forward pass. Writes S (the scores the softmax sees, -inf where masked), P (the softmax,
// before dropout; 0 where masked), out, and lse when it is not null.
void core_forward(const CoreProblem& pb, const double* q, const double* k, const double* v,
                  double* S, double* P, double* out, double* lse);

// Backward pass: the exact gradients of L = Σ dout ∘ out. `out` and `P` must be core_forward's
// results for the same inputs (the exact float64 values, not a rounded copy). dq is overwritten;
// dk and dv are ACCUMULATED (+=) so that the query heads of a GQA group can sum into one kv head:
// zero them first. dS receives the gradient with respect to the raw scaled score scale·q·k
// (i.e. after the chain rule through softcap), 0 where masked. Rows that see no key get dq = 0;
// keys that no row sees get no contribution.
void core_backward(const CoreProblem& pb, const double* q, const double* k, const double* v,
                   const double* out, const double* dout, const double* P, double* dS, double* dq,
                   double* dk, double* dv);

// The sink's gradient from this problem: dL/dsink = −Σ_i exp(sink − LSE_i) · D_i with
// D_i = dout_i · out_i (0 without a sink). `out` and `lse` are core_forward's results.
double core_dsink(const CoreProblem& pb, const double* out, const double* dout, const double* lse);

}  // namespace ref
}  // namespace detail
}  // namespace flashlab
