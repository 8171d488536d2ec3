// src/cpu/reference.cpp — the reference forward pass: the float64 oracle every backend is tested
// against.
//
// Each (batch, query head) is an independent problem: gather q (that head) and k, v (its kv head,
// GQA/MQA) into dense doubles, run ref::core_forward (reference_core.h), round out and LSE back.
// OpenMP spreads the (batch, head) pairs over threads; each thread owns a float64 workspace with
// the full S and P (seqlen_q x seqlen_k), the quadratic memory FlashAttention avoids. All scratch
// is allocated before anything is written, so running out of memory returns kOutOfMemory with
// the outputs untouched.
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
struct FwdWorkspace {
  Scratch<double> q, k, v, out;  // (seqlen, head_dim)
  Scratch<double> lse;           // (seqlen_q)
  Scratch<double> S, P;          // (seqlen_q, seqlen_k)

  void allocate(int64_t sq, int64_t sk, int64_t d) {
    S.resize(sq * sk);  // the big ones first: fail fast
    P.resize(sq * sk);
    q.resize(sq * d);
    out.resize(sq * d);
    lse.resize(sq);
    k.resize(sk * d);
    v.resize(sk * d);
  }
};

Status out_of_memory(const FwdParams& p, int64_t sq, int64_t sk, int threads) {
  std::ostringstream os;
  os << "reference forward: cannot allocate its float64 scratch (S and P are seqlen_q x seqlen_k = "
     << sq << " x " << sk << " doubles each, per thread, " << threads
     << " threads); use a smaller problem, fewer num_threads (now " << p.num_threads
     << ") or impl cpu_flash";
  return Status(StatusCode::kOutOfMemory, os.str());
}

// Forward of (sequence b, query head h) with workspace w.
void forward_one(const FwdParams& p, int64_t b, int64_t h, FwdWorkspace& w) {
  const SeqBounds s = seq_bounds(p, b);
  const int64_t hk = kv_head(p, h);
  ref::load_rows(p, p.q, b, s.q_begin, s.q_len, h, w.q.data());
  ref::load_rows(p, p.k, b, s.k_begin, s.k_len, hk, w.k.data());
  ref::load_rows(p, p.v, b, s.k_begin, s.k_len, hk, w.v.data());

  const ref::CoreProblem pb = ref::core_problem(p, b, h, s.q_len, s.k_len);
  ref::core_forward(pb, w.q.data(), w.k.data(), w.v.data(), w.S.data(), w.P.data(), w.out.data(),
                    p.lse ? w.lse.data() : nullptr);

  ref::store_rows(p, p.out, b, s.q_begin, s.q_len, h, w.out.data());
  if (p.lse) {
    for (int64_t i = 0; i < s.q_len; ++i)
      p.lse[lse_offset(p, p.lse_batch_stride, p.lse_head_stride, b, s.q_begin, i, h)] =
          static_cast<float>(w.lse[i]);  // -inf stays -inf
  }
}

}  // namespace

Status reference_forward(const FwdParams& p) {
  int64_t max_q, max_k;
  ref::longest_sequences(p, &max_q, &max_k);
  const int64_t items = p.batch * p.heads_q;
  const int threads = ref::thread_count(p.num_threads, items);
  if (!ref::doubles_fit(max_q, max_k) || !ref::doubles_fit(std::max(max_q, max_k), p.head_dim))
    return out_of_memory(p, max_q, max_k, threads);

  std::unique_ptr<FwdWorkspace[]> ws;
  try {
    ws.reset(new FwdWorkspace[threads]);
    for (int t = 0; t < threads; ++t) ws[t].allocate(max_q, max_k, p.head_dim);
  } catch (const std::bad_alloc&) {
    return out_of_memory(p, max_q, max_k, threads);
  }

  // Dynamic schedule: with variable lengths or masks the pairs differ widely in cost.
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t item = 0; item < items; ++item)
    forward_one(p, item / p.heads_q, item % p.heads_q, ws[omp_get_thread_num()]);
  return Status::Ok();
}

}  // namespace detail
}  // namespace flashlab
