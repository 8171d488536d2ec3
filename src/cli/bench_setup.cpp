#include "cli/bench_setup.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cli/sgemm_peer.h"

namespace flashlab {
namespace cli {

testing::ProblemSpec make_spec(const BenchOptions& o) {
  testing::ProblemSpec s;
  s.batch = o.batch;
  s.seqlen_q = o.seqlen_q;
  s.seqlen_k = o.seqlen_k;
  s.heads_q = o.heads;
  s.heads_kv = o.heads_kv;
  s.head_dim = o.head_dim;
  s.dtype = o.dtype;
  s.causal = o.causal;
  s.causal_align = o.align;
  s.window_left = o.window_left;
  s.window_right = o.window_right;
  s.sink_tokens = o.sink_tokens;
  s.softcap = o.softcap;
  s.alibi = o.alibi;
  s.sinks = o.sinks;
  s.dropout_p = o.dropout;
  s.dropout_seed = o.seed;
  s.data_seed = o.seed;
  s.lens_q = o.varlen_q;
  s.lens_k = o.varlen_k;
  if (!s.lens_q.empty()) {  // as testing::Problem does: batch and maximum lengths from the list
    s.batch = static_cast<int64_t>(s.lens_q.size());
    s.seqlen_q = *std::max_element(s.lens_q.begin(), s.lens_q.end());
    s.seqlen_k = *std::max_element(s.lens_k.begin(), s.lens_k.end());
  }
  return s;
}

namespace {
// Distinct, aligned placeholder addresses: validation may check alignment or aliasing, and never
// reads tensor data.
alignas(256) unsigned char g_placeholder[12][256];
}  // namespace

Status ShapeOnlyParams::init(const testing::ProblemSpec& spec) {
  spec_ = spec;
  sinks_.assign(static_cast<size_t>(std::max<int64_t>(spec.heads_q, 1)), 0.0f);
  rows_q_ = spec.seqlen_q;
  rows_k_ = spec.seqlen_k;
  if (!spec.lens_q.empty()) {
    int64_t tq = 0, tk = 0;
    cu_q_.assign(1, 0);
    cu_k_.assign(1, 0);
    for (size_t i = 0; i < spec.lens_q.size(); ++i) {
      tq += spec.lens_q[i];
      tk += spec.lens_k[i];
      if (tq > INT32_MAX || tk > INT32_MAX || tq < INT32_MIN || tk < INT32_MIN)
        return Status::Invalid("--varlen: the total length does not fit the int32 cu_seqlens");
      cu_q_.push_back(static_cast<int32_t>(tq));
      cu_k_.push_back(static_cast<int32_t>(tk));
    }
    rows_q_ = tq;
    rows_k_ = tk;
  }
  return Status::Ok();
}

void ShapeOnlyParams::fill(AttentionConfig* c, Impl impl) const {
  const testing::ProblemSpec& s = spec_;
  c->dtype = s.dtype;
  c->device = Device::kCPU;
  c->impl = impl;
  c->batch = s.batch;
  c->seqlen_q = s.seqlen_q;
  c->seqlen_k = s.seqlen_k;
  c->heads_q = s.heads_q;
  c->heads_kv = s.heads_kv;
  c->head_dim = s.head_dim;
  c->softcap = s.softcap;
  c->alibi_slopes = s.alibi ? reinterpret_cast<const float*>(g_placeholder[11]) : nullptr;
  c->sink_logits = s.sinks ? sinks_.data() : nullptr;  // validation reads these values (zeros)
  c->causal = s.causal;
  c->causal_align = s.causal_align;
  c->window_left = s.window_left;
  c->window_right = s.window_right;
  c->sink_tokens = s.sink_tokens;
  c->dropout_p = s.dropout_p;
  c->dropout_seed = s.dropout_seed;
  if (!cu_q_.empty()) {
    c->cu_seqlens_q = cu_q_.data();
    c->cu_seqlens_k = cu_k_.data();
    c->total_q = rows_q_;
    c->total_k = rows_k_;
  }
}

FwdParams ShapeOnlyParams::forward(Impl impl) const {
  FwdParams p;
  fill(&p, impl);
  const int64_t hq = spec_.heads_q, hk = spec_.heads_kv, d = spec_.head_dim;
  p.q = contiguous(static_cast<const void*>(g_placeholder[0]), rows_q_, hq, d);
  p.k = contiguous(static_cast<const void*>(g_placeholder[1]), rows_k_, hk, d);
  p.v = contiguous(static_cast<const void*>(g_placeholder[2]), rows_k_, hk, d);
  p.out = contiguous(static_cast<void*>(g_placeholder[3]), rows_q_, hq, d);
  p.lse = reinterpret_cast<float*>(g_placeholder[4]);
  const bool varlen = !cu_q_.empty();
  p.lse_head_stride = rows_q_;
  p.lse_batch_stride = varlen ? 0 : hq * rows_q_;
  return p;
}

BwdParams ShapeOnlyParams::backward(Impl impl) const {
  const FwdParams f = forward(impl);
  BwdParams p;
  fill(&p, impl);
  const int64_t hq = spec_.heads_q, hk = spec_.heads_kv, d = spec_.head_dim;
  p.q = f.q;
  p.k = f.k;
  p.v = f.v;
  p.out = contiguous(static_cast<const void*>(g_placeholder[3]), rows_q_, hq, d);
  p.dout = contiguous(static_cast<const void*>(g_placeholder[5]), rows_q_, hq, d);
  p.lse = f.lse;
  p.lse_batch_stride = f.lse_batch_stride;
  p.lse_head_stride = f.lse_head_stride;
  p.dq = contiguous(static_cast<void*>(g_placeholder[6]), rows_q_, hq, d);
  p.dk = contiguous(static_cast<void*>(g_placeholder[7]), rows_k_, hk, d);
  p.dv = contiguous(static_cast<void*>(g_placeholder[8]), rows_k_, hk, d);
  return p;
}

double HostMemory::total() const {
  return problem + std::max({sgemm, reference, cpu_flash});
}

HostMemory host_memory_needed(const testing::ProblemSpec& s, const MemoryPlan& plan) {
  double rows_q = static_cast<double>(s.batch) * s.seqlen_q;
  double rows_k = static_cast<double>(s.batch) * s.seqlen_k;
  double batch = static_cast<double>(s.batch);
  if (!s.lens_q.empty()) {
    rows_q = rows_k = 0;
    batch = static_cast<double>(s.lens_q.size());
    for (size_t i = 0; i < s.lens_q.size(); ++i) {
      rows_q += s.lens_q[i];
      rows_k += s.lens_k[i];
    }
  }
  const double es = static_cast<double>(dtype_size(s.dtype));
  const double d = static_cast<double>(s.head_dim);
  const double hq = static_cast<double>(s.heads_q), hk = static_cast<double>(s.heads_kv);
  const double threads = std::max(1, plan.threads);
  HostMemory m;
  // q, out, dout, dq and k, v, dk, dv, twice over: the problem and the oracle's copies; LSE twice.
  m.problem = 2 * es * d * (4 * rows_q * hq + 4 * rows_k * hk) + 2 * 4 * rows_q * hq;
  if (plan.sgemm_flops > 0) {
    const SgemmResult g = sgemm_shape(plan.sgemm_flops);
    m.sgemm = 4.0 * (g.m * g.k + g.k * g.n + g.m * g.n);
  }
  if (plan.reference) {
    // src/cpu/reference.cpp and reference_backward.cpp: each thread owns S and P (longest
    // seqlen_q x longest seqlen_k doubles) and its rows in doubles; the forward has one work item
    // per (batch, query head), the backward one per (batch, kv head).
    const double sq = static_cast<double>(s.seqlen_q), sk = static_cast<double>(s.seqlen_k);
    const double fwd = 8 * (2 * sq * sk + 2 * sq * d + 2 * sk * d + sq);
    const double bwd = 8 * (2 * sq * sk + 4 * sq * d + 4 * sk * d);
    const double t_fwd = std::min(threads, std::max(1.0, batch * hq));
    const double t_bwd = std::min(threads, std::max(1.0, batch * hk));
    m.reference_per_thread = plan.backward ? bwd : fwd;
    m.reference_threads = static_cast<int>(plan.backward ? std::max(t_fwd, t_bwd) : t_fwd);
    m.reference = plan.backward ? std::max(fwd * t_fwd, bwd * t_bwd) : fwd * t_fwd;
  }
  if (plan.cpu_flash) {
    // Tiles of a few blocks of head_dim floats per thread (generous), and the backward's fp32 row
    // sums of dO . O.
    m.cpu_flash = threads * 4096.0 * std::max(64.0, d) + (plan.backward ? 4 * rows_q * hq : 0);
  }
  return m;
}

Status check_sizes(const testing::ProblemSpec& s) {
  auto negative = [](const char* name, int64_t v) {
    return Status::Invalid(std::string(name) + " (" + std::to_string(v) + ") must be positive");
  };
  if (s.batch <= 0) return negative("batch", s.batch);
  if (s.heads_q <= 0) return negative("heads_q", s.heads_q);
  if (s.heads_kv <= 0) return negative("heads_kv", s.heads_kv);
  if (s.head_dim <= 0) return negative("head_dim", s.head_dim);
  if (s.seqlen_q < 0) return negative("seqlen_q", s.seqlen_q);
  if (s.seqlen_k < 0) return negative("seqlen_k", s.seqlen_k);
  for (size_t i = 0; i < s.lens_q.size(); ++i)
    if (s.lens_q[i] < 0 || s.lens_k[i] < 0)
      return Status::Invalid("--varlen: sequence " + std::to_string(i) + " has a negative length");
  return Status::Ok();
}

Status check_host_memory(const testing::ProblemSpec& s, const MemoryPlan& plan) {
  FLASHLAB_RETURN_IF_ERROR(check_sizes(s));
  const HostMemory m = host_memory_needed(s, plan);
  const double have =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  const double usable = 0.75 * have;
  const double need = m.total();
  if (need <= usable) return Status::Ok();

  std::string msg = "the run needs " + format_bytes(need) + " of host memory, this machine has " +
                    format_bytes(have) + " (the limit is 75 %: " + format_bytes(usable) +
                    "): the problem's buffers " + format_bytes(m.problem);
  const bool reference_dominates = m.reference > 0 && m.reference >= std::max(m.sgemm, m.cpu_flash);
  if (reference_dominates) {
    msg += ", the float64 reference's scratch " + format_bytes(m.reference) + " (S and P, " +
           std::to_string(s.seqlen_q) + " x " + std::to_string(s.seqlen_k) +
           " doubles each: " + format_bytes(m.reference_per_thread) + " per thread, " +
           std::to_string(m.reference_threads) + (m.reference_threads == 1 ? " thread)" : " threads)");
    const double fit = std::floor((usable - m.problem) / m.reference_per_thread);
    msg += ". Use ";
    if (fit >= 1 && fit < m.reference_threads)
      msg += "--threads " + std::to_string(static_cast<int>(fit)) + " (fits), ";
    msg += "--no-check (no reference: outputs are only checked for NaN) or a smaller shape";
  } else if (m.sgemm > 0 && m.sgemm >= m.cpu_flash) {
    msg += ", the sgemm peer's matrices " + format_bytes(m.sgemm) + ". Use --no-sgemm or a smaller shape";
  } else {
    msg += ". Use a smaller shape";
  }
  return Status(StatusCode::kOutOfMemory, msg);
}

double reference_matrix_bytes(const testing::ProblemSpec& s) {
  return 8.0 * static_cast<double>(s.seqlen_q) * static_cast<double>(s.seqlen_k);
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (bytes >= 1024 && u < 5) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return buf;
}

}  // namespace cli
}  // namespace flashlab
