// src/cpu/reference_backward.cpp — the reference backward pass: exact float64 gradients.
//
// The reference is the oracle, so it does NOT trust its inputs `out` and `lse` (a backend under
// test may have produced them): it ignores both and recomputes S, P and the exact float64 output
// O from q and k with ref::core_forward, then applies the analytic gradients of
// ref::core_backward (reference_core.h):
//   dV = (P ∘ Z)ᵀ dO     dP = (dO Vᵀ) ∘ Z     D = rowsum(dO ∘ O)     dS = P ∘ (dP − D)
//   dS_raw = dS · sech²(raw / softcap) (softcap only)   dQ = scale · dS_raw K   dK = scale · dS_rawᵀ Q
// With attention sinks, P and LSE include the sink and dsink_h = −Σ_{b,i} exp(sink_h − LSE_i) D_i
// (ref::core_dsink); the per-(b, h) sums are added over b in a fixed order after the parallel loop.
// Work is split over (batch, kv head): one thread owns a kv head and loops over the query heads
// of its GQA group, summing their dK/dV in float64 before a single rounded store, so no atomics
// are needed and the result does not depend on the thread count (always deterministic).
#include <algorithm>
#include <memory>
#include <new>
#include <sstream>

#include <omp.h>

#include "api/backend.h"
#include "common/problem.h"
#include "cpu/reference_core.h"
#include "cpu/reference_io.h"
#include "cpu/scratch.h"

namespace flashlab {
namespace detail {
namespace {

// One thread's float64 buffers, sized for the longest sequences of the call.
struct BwdWorkspace {
  Scratch<double> q, out, dout, dq;  // (seqlen_q, head_dim), one query head at a time
  Scratch<double> k, v, dk, dv;      // (seqlen_k, head_dim), the kv head of the group
  Scratch<double> S, P;              // (seqlen_q, seqlen_k); S is reused for dS
  Scratch<double> lse;               // (seqlen_q), for dsink

  void allocate(int64_t sq, int64_t sk, int64_t d) {
    S.resize(sq * sk);  // the big ones first: fail fast
    P.resize(sq * sk);
    for (Scratch<double>* t : {&q, &out, &dout, &dq}) t->resize(sq * d);
    for (Scratch<double>* t : {&k, &v, &dk, &dv}) t->resize(sk * d);
    lse.resize(sq);
  }
};

Status out_of_memory(const BwdParams& p, int64_t sq, int64_t sk, int threads) {
  std::ostringstream os;
  os << "reference backward: cannot allocate its float64 scratch (S and P are seqlen_q x seqlen_k = "
     << sq << " x " << sk << " doubles each, per thread, " << threads
     << " threads); use a smaller problem, fewer num_threads (now " << p.num_threads
     << ") or impl cpu_flash";
  return Status(StatusCode::kOutOfMemory, os.str());
}

// Backward of (sequence b, kv head hk) and all query heads that read it.
// dsink_part[b * heads_q + h] receives the sink gradient of (b, h) when p.dsink is set.
void backward_one(const BwdParams& p, int64_t b, int64_t hk, BwdWorkspace& w, double* dsink_part) {
  const SeqBounds s = seq_bounds(p, b);
  const int64_t D = p.head_dim;
  ref::load_rows(p, p.k, b, s.k_begin, s.k_len, hk, w.k.data());
  ref::load_rows(p, p.v, b, s.k_begin, s.k_len, hk, w.v.data());
  std::fill(w.dk.data(), w.dk.data() + s.k_len * D, 0.0);  // keys no query sees keep dK = dV = 0
  std::fill(w.dv.data(), w.dv.data() + s.k_len * D, 0.0);

  const int64_t group = p.heads_q / p.heads_kv;
  for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
    ref::load_rows(p, p.q, b, s.q_begin, s.q_len, h, w.q.data());
    ref::load_rows(p, p.dout, b, s.q_begin, s.q_len, h, w.dout.data());
    const ref::CoreProblem pb = ref::core_problem(p, b, h, s.q_len, s.k_len);
    // Recompute the forward (p.out and p.lse are ignored on purpose, see the file comment).
    ref::core_forward(pb, w.q.data(), w.k.data(), w.v.data(), w.S.data(), w.P.data(), w.out.data(),
                      w.lse.data());
    if (dsink_part)
      dsink_part[b * p.heads_q + h] = ref::core_dsink(pb, w.out.data(), w.dout.data(), w.lse.data());
    ref::core_backward(pb, w.q.data(), w.k.data(), w.v.data(), w.out.data(), w.dout.data(),
                       w.P.data(), w.S.data(), w.dq.data(), w.dk.data(), w.dv.data());
    ref::store_rows(p, p.dq, b, s.q_begin, s.q_len, h, w.dq.data());
  }
  ref::store_rows(p, p.dk, b, s.k_begin, s.k_len, hk, w.dk.data());
  ref::store_rows(p, p.dv, b, s.k_begin, s.k_len, hk, w.dv.data());
}

}  // namespace

Status reference_backward(const BwdParams& p) {
  int64_t max_q, max_k;
  ref::longest_sequences(p, &max_q, &max_k);
  const int64_t items = p.batch * p.heads_kv;
  const int threads = ref::thread_count(p.num_threads, items);
  if (!ref::doubles_fit(max_q, max_k) || !ref::doubles_fit(std::max(max_q, max_k), p.head_dim))
    return out_of_memory(p, max_q, max_k, threads);

  std::unique_ptr<BwdWorkspace[]> ws;
  std::unique_ptr<double[]> dsink_part;  // (batch, heads_q)
  try {
    ws.reset(new BwdWorkspace[threads]);
    for (int t = 0; t < threads; ++t) ws[t].allocate(max_q, max_k, p.head_dim);
    if (p.dsink) dsink_part.reset(new double[p.batch * p.heads_q]());
  } catch (const std::bad_alloc&) {
    return out_of_memory(p, max_q, max_k, threads);
  }

#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t item = 0; item < items; ++item)
    backward_one(p, item / p.heads_kv, item % p.heads_kv, ws[omp_get_thread_num()], dsink_part.get());
  if (p.dsink) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      double acc = 0.0;
      for (int64_t b = 0; b < p.batch; ++b) acc += dsink_part[b * p.heads_q + h];
      p.dsink[h] = static_cast<float>(acc);
    }
  }
  return Status::Ok();
}

}  // namespace detail
}  // namespace flashlab
