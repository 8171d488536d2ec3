#include "cli/bench_setup.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

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
  s.softcap = o.softcap;
  s.alibi = o.alibi;
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
  c->causal = s.causal;
  c->causal_align = s.causal_align;
  c->window_left = s.window_left;
  c->window_right = s.window_right;
  c->dropout_p = s.dropout_p;
  c->dropout_seed = s.dropout_seed;
  if (!cu_q_.empty()) {
    c->cu_seqlens_q = cu_q_.data();
    c->cu_seqlens_k = cu_k_.data();
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

Status check_host_memory(const testing::ProblemSpec& s) {
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

  // Doubles throughout: absurd sizes must not overflow before they are rejected.
  double rows_q = static_cast<double>(s.batch) * s.seqlen_q;
  double rows_k = static_cast<double>(s.batch) * s.seqlen_k;
  if (!s.lens_q.empty()) {
    rows_q = rows_k = 0;
    for (size_t i = 0; i < s.lens_q.size(); ++i) {
      rows_q += s.lens_q[i];
      rows_k += s.lens_k[i];
    }
  }
  const double es = static_cast<double>(dtype_size(s.dtype));
  const double d = static_cast<double>(s.head_dim);
  // q, out, dout, dq and k, v, dk, dv, twice over: the problem and the reference's copies.
  const double need = 2 * es * d * (4 * rows_q * s.heads_q + 4 * rows_k * s.heads_kv);
  const double have =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (need > 0.75 * have)
    return Status(StatusCode::kOutOfMemory, "the problem needs " + format_bytes(need) +
                                                " of host memory, this machine has " +
                                                format_bytes(have));
  return Status::Ok();
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
