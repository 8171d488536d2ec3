// learn/backward_util.cuh — what attention_backward.cu needs beyond learn/harness.cuh.
//
//   lowp_backward_baseline   a same-precision backward on the CPU: fp32 arithmetic, P and dS rounded
//                            to the element type before the products that consume them (what every
//                            tensor-core kernel does). Its distance to the float64 reference sets
//                            the tolerance scale of judge(), exactly as lowp_forward_baseline does.
//   BackwardCase             one validation problem: inputs, reference forward (out, LSE) and
//                            backward (dq, dk, dv), baseline errors, device mirror; check(version).
//   prepare_cases            builds many cases on all CPU cores (the float64 reference dominates).
//   forward_for_timing       fills out/LSE of a large timing problem with a forward learning kernel.
#pragma once

#include <atomic>
#include <memory>
#include <thread>

#include "harness.cuh"
#include "kernels/backward_common.cuh"

namespace flashlab {
namespace learn {

// dq, dk, dv of a same-precision implementation (see the file comment), from the problem's inputs
// and its forward outputs pb.out (rounded to the dtype, as a kernel reads it) and pb.lse.
inline void lowp_backward_baseline(const testing::Problem& pb, testing::HostTensor* dq, testing::HostTensor* dk,
                                   testing::HostTensor* dv) {
  const testing::ProblemSpec& s = pb.spec;
  *dq = pb.dq;
  *dk = pb.dk;
  *dv = pb.dv;
  const float scale = s.softmax_scale > 0 ? s.softmax_scale : 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const int64_t group = s.heads_q / s.heads_kv, d = s.head_dim, sq = s.seqlen_q, sk = s.seqlen_k;
  const int64_t shift = s.causal_align == CausalAlign::kBottomRight ? sk - sq : 0;
  auto work = [&](int64_t bk) {  // one (batch, kv head): owns its dK, dV (no races)
    const int64_t b = bk / s.heads_kv, hk = bk % s.heads_kv;
    std::vector<float> K(sk * d), V(sk * d), dK(sk * d, 0.0f), dV(sk * d, 0.0f), row_p(sk), row_ds(sk);
    for (int64_t j = 0; j < sk; ++j)
      for (int64_t e = 0; e < d; ++e) {
        K[j * d + e] = pb.k.get(b, j, hk, e);
        V[j * d + e] = pb.v.get(b, j, hk, e);
      }
    std::vector<float> q(d), o(d), dout(d), dqrow(d);
    for (int64_t h = hk * group; h < (hk + 1) * group; ++h)
      for (int64_t i = 0; i < sq; ++i) {
        const int64_t hi = s.causal ? std::min(sk - 1, i + shift) : sk - 1;
        const float lse = pb.lse[b * pb.lse_batch_stride + h * pb.lse_head_stride + i];
        float D = 0;
        for (int64_t e = 0; e < d; ++e) {
          q[e] = pb.q.get(b, i, h, e);
          o[e] = pb.out.get(b, i, h, e);
          dout[e] = pb.dout.get(b, i, h, e);
          D += dout[e] * o[e];
        }
        std::fill(dqrow.begin(), dqrow.end(), 0.0f);
        for (int64_t j = 0; j <= hi && std::isfinite(lse); ++j) {
          float sc = 0, dp = 0;
          for (int64_t e = 0; e < d; ++e) {
            sc += q[e] * K[j * d + e];
            dp += dout[e] * V[j * d + e];
          }
          const float p = std::exp(sc * scale - lse);
          const float pr = round_to(s.dtype, p), dsr = round_to(s.dtype, p * (dp - D));
          for (int64_t e = 0; e < d; ++e) {
            dV[j * d + e] += pr * dout[e];
            dK[j * d + e] += dsr * q[e];
            dqrow[e] += dsr * K[j * d + e];
          }
        }
        for (int64_t e = 0; e < d; ++e) dq->set(b, i, h, e, scale * dqrow[e]);
      }
    for (int64_t j = 0; j < sk; ++j)
      for (int64_t e = 0; e < d; ++e) {
        dk->set(b, j, hk, e, scale * dK[j * d + e]);
        dv->set(b, j, hk, e, dV[j * d + e]);
      }
  };
  parallel_for(s.batch * s.heads_kv, work);
}

// Bitwise equality of two host tensors' logical elements (the deterministic mode's promise).
inline bool bitwise_equal(const testing::HostTensor& a, const testing::HostTensor& b) {
  const int64_t es = dtype_size(a.dtype);
  for (int64_t bb = 0; bb < a.batch; ++bb)
    for (int64_t r = 0; r < a.rows; ++r)
      for (int64_t h = 0; h < a.heads; ++h)
        if (std::memcmp(a.bytes.data() + a.index(bb, r, h, 0) * es, b.bytes.data() + b.index(bb, r, h, 0) * es,
                        a.dim * es) != 0)
          return false;
  return true;
}

struct BackwardCase {
  testing::ProblemSpec spec;
  testing::Problem pb;
  testing::HostTensor ref_dq, ref_dk, ref_dv;
  testing::ErrorStats base_dq, base_dk, base_dv;
  DeviceProblem dev;
  std::string error;  // non-empty: the case could not be prepared

  explicit BackwardCase(const testing::ProblemSpec& s) : spec(s), pb(s) {}

  // CPU part (thread-safe, no CUDA): reference forward → out, LSE (the kernels' inputs); reference
  // backward → dq, dk, dv; then the same-precision baseline's errors.
  // One thread each: prepare_cases runs many cases at once (nested OpenMP teams would spin).
  void prepare_host() {
    FwdParams fp = pb.fwd_params(Impl::kReference);
    fp.num_threads = 1;
    Status st = attention_forward(fp);
    BwdParams bp = pb.bwd_params(Impl::kReference);
    bp.num_threads = 1;
    if (st.ok()) st = attention_backward(bp);
    if (!st.ok()) {
      error = "reference: " + st.to_string();
      return;
    }
    ref_dq = pb.dq;
    ref_dk = pb.dk;
    ref_dv = pb.dv;
    testing::HostTensor lq, lk, lv;
    lowp_backward_baseline(pb, &lq, &lk, &lv);
    base_dq = testing::compare(lq, ref_dq);
    base_dk = testing::compare(lk, ref_dk);
    base_dv = testing::compare(lv, ref_dv);
  }
  void prepare_device() {
    if (error.empty() && !dev.upload(pb)) error = "upload failed";
  }

  // The harness rule (judge) on one gradient. One special case: a reference that is exactly 0
  // everywhere (seqlen_k = 1: P = 1, so dS = dP − D = dO·V − dO·O = 0 and dQ = dK = 0) has no
  // relative error; a kernel's fp32 cancellation leaves ~1e-7 there, so it is judged by max_abs
  // alone, against 1e-4 (a real error is 1e-2 or more).
  Verdict judge_grad(const char* what, const testing::HostTensor& got, const testing::HostTensor& ref,
                     const testing::ErrorStats& base) const {
    testing::ErrorStats e = testing::compare(got, ref);
    double ref_max = 0;
    for (int64_t bb = 0; bb < ref.batch; ++bb)
      for (int64_t r = 0; r < ref.rows; ++r)
        for (int64_t h = 0; h < ref.heads; ++h)
          for (int64_t d = 0; d < ref.dim; ++d) ref_max = std::max(ref_max, std::fabs(double(ref.get(bb, r, h, d))));
    const double eps = dtype_eps(spec.dtype);
    if (ref_max > 0 || e.count == 0) return judge(what, e, base, eps / 4, 2 * eps);
    e.rel_l2 = 0;
    Verdict v = judge(what, e, base, 0, 1e-4);
    v.line += " (reference is 0: max_abs only)";
    return v;
  }

  // Runs `version` once on poisoned gradients; leaves them in pb.dq/dk/dv.
  Status run(int version, bool deterministic) {
    if (!dev.poison_backward()) return Status(StatusCode::kDeviceError, "poison failed");
    BwdParams p = dev.bwd_params(pb, version);
    p.deterministic = deterministic;
    FLASHLAB_RETURN_IF_ERROR(detail::learn_backward(version, p));
    if (!LEARN_CHECK(cudaDeviceSynchronize()) || !dev.download_backward(pb))
      return Status(StatusCode::kDeviceError, "device error after the run");
    return Status::Ok();
  }

  // Judges dq, dk, dv of `version`; in deterministic mode also runs it twice more and demands
  // bitwise-identical gradients. Unsupported shapes are reported as skipped, never silently.
  Verdict check(int version, bool deterministic, bool* skipped) {
    *skipped = false;
    Verdict v;
    if (!error.empty()) {
      v.line = error;
      return v;
    }
    const Status sup = detail::learn_supports(version, dev.bwd_params(pb, version), /*backward=*/true);
    if (!sup.ok()) {
      *skipped = true;
      v.pass = true;
      v.line = "skipped: " + sup.to_string();
      return v;
    }
    Status st = run(version, deterministic);
    if (!st.ok()) {
      v.line = "run: " + st.to_string();
      return v;
    }
    const Verdict a = judge_grad("dq", pb.dq, ref_dq, base_dq);
    const Verdict b = judge_grad("dk", pb.dk, ref_dk, base_dk);
    const Verdict c = judge_grad("dv", pb.dv, ref_dv, base_dv);
    v.pass = a.pass && b.pass && c.pass;
    v.line = a.line + " | " + b.line + " | " + c.line;
    if (deterministic && v.pass) {
      const testing::HostTensor q1 = pb.dq, k1 = pb.dk, v1 = pb.dv;
      for (int rep = 0; rep < 2 && v.pass; ++rep) {
        st = run(version, true);
        const bool same = st.ok() && bitwise_equal(pb.dq, q1) && bitwise_equal(pb.dk, k1) && bitwise_equal(pb.dv, v1);
        if (!same) {
          v.pass = false;
          v.line += st.ok() ? " | NOT DETERMINISTIC (rerun differs)" : " | rerun: " + st.to_string();
        }
      }
      if (v.pass) v.line += " | 3 runs bitwise equal";
    }
    return v;
  }
};

// Builds the cases' host side on all cores (one case per thread: the reference parallelizes over
// (batch, kv head), which is 1..4 here), then uploads them one by one.
inline std::vector<std::unique_ptr<BackwardCase>> prepare_cases(const std::vector<testing::ProblemSpec>& specs) {
  std::vector<std::unique_ptr<BackwardCase>> cases;
  for (const auto& s : specs) cases.push_back(std::make_unique<BackwardCase>(s));
  // Largest first, so the few 4224² cases do not start last and leave the other cores idle.
  std::vector<size_t> order(cases.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto cost = [&](size_t i) {
    const testing::ProblemSpec& s = cases[i]->spec;
    return static_cast<double>(s.batch) * s.heads_q * s.seqlen_q * s.seqlen_k * s.head_dim;
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return cost(x) > cost(y); });
  std::atomic<size_t> next{0};
  const size_t nt = std::max<size_t>(1, std::min<size_t>(cases.size(), std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (size_t t = 0; t < nt; ++t)
    threads.emplace_back([&] {
      for (size_t i = next++; i < cases.size(); i = next++) cases[order[i]]->prepare_host();
    });
  for (auto& th : threads) th.join();
  for (auto& c : cases) c->prepare_device();
  return cases;
}

// out and LSE of a timing problem from the fastest forward learning kernel that runs it (they
// are inputs of the backward; the timing shapes are too large for the CPU reference).
inline Status forward_for_timing(TimingProblem& tp) {
  Status st;
  for (int v = 4; v >= 0; --v) {
    st = run_forward(v, tp.fwd_params(v));
    if (st.ok()) return LEARN_CHECK(cudaDeviceSynchronize()) ? Status::Ok() : Status(StatusCode::kDeviceError, "sync");
  }
  return st;
}

}  // namespace learn
}  // namespace flashlab
