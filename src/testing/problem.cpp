#include "testing/problem.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>

namespace flashlab {
namespace testing {

std::string ProblemSpec::describe() const {
  std::ostringstream os;
  if (!lens_q.empty()) {
    os << "varlen[" << lens_q.size() << "]";
  } else {
    os << "b" << batch << " sq" << seqlen_q << " sk" << seqlen_k;
  }
  os << " hq" << heads_q << " hkv" << heads_kv << " d" << head_dim << " " << to_string(dtype);
  if (causal) os << " causal(" << (causal_align == CausalAlign::kBottomRight ? "br" : "tl") << ")";
  if (window_left >= 0 || window_right >= 0) os << " win(" << window_left << "," << window_right << ")";
  if (sink_tokens > 0) os << " sink_tokens" << sink_tokens;
  if (softcap > 0) os << " softcap" << softcap;
  if (alibi) os << " alibi";
  if (sinks) os << " sinks";
  if (dropout_p > 0) os << " drop" << dropout_p;
  if (row_pad > 0) os << " pad" << row_pad;
  return os.str();
}

void HostTensor::allocate(DType dt, int64_t b, int64_t r, int64_t h, int64_t d, int64_t row_pad) {
  dtype = dt;
  batch = b;
  rows = r;
  heads = h;
  dim = d;
  head_stride = d;
  row_stride = h * d + row_pad;
  batch_stride = r * row_stride;
  const int64_t n = std::max<int64_t>(b * batch_stride, 1);
  bytes.assign(static_cast<size_t>(n * dtype_size(dt)), 0);
}

float HostTensor::get(int64_t b, int64_t r, int64_t h, int64_t d) const {
  return load_as_float(dtype, bytes.data() + index(b, r, h, d) * dtype_size(dtype));
}
void HostTensor::set(int64_t b, int64_t r, int64_t h, int64_t d, float v) {
  store_from_float(dtype, bytes.data() + index(b, r, h, d) * dtype_size(dtype), v);
}
double HostTensor::max_abs_value() const {
  double m = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t d = 0; d < dim; ++d) m = std::max(m, std::fabs(double(get(b, r, h, d))));
  return m;
}

void HostTensor::fill_nan() {
  const int64_t es = dtype_size(dtype);
  const int64_t n = static_cast<int64_t>(bytes.size()) / es;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i = 0; i < n; ++i) store_from_float(dtype, bytes.data() + i * es, nan);
}

void HostTensor::fill_normal_parallel(uint64_t seed, float scale) {
  constexpr int64_t kChunkRows = 64;
  const int64_t total_rows = batch * rows;
  const int64_t chunks = (total_rows + kChunkRows - 1) / kChunkRows;
#pragma omp parallel for schedule(dynamic)
  for (int64_t c = 0; c < chunks; ++c) {
    std::mt19937_64 gen(seed + static_cast<uint64_t>(c) * 0x9E3779B97F4A7C15ull);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (int64_t i = c * kChunkRows; i < std::min(total_rows, (c + 1) * kChunkRows); ++i) {
      const int64_t b = i / rows, r = i % rows;
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t d = 0; d < dim; ++d) set(b, r, h, d, scale * dist(gen));  // set() rounds
    }
  }
}

namespace {
// Tensors of at least this many elements (the CLI's benchmark shapes: b1 h16 s16k d128 is 33.5 M)
// are filled on every core, from one draw of the problem's generator; smaller ones (every test's)
// draw from that generator itself as before, so their values are unchanged. One sequential fill of
// the four 33.5 M tensors took ~3 s of each `flashlab bench` call, most of a device A/B's time
// (tools/ab_libs.py, session 27).
constexpr int64_t kParallelFillElements = int64_t(1) << 22;

void fill_normal(HostTensor& t, std::mt19937_64& rng, float scale) {
  if (t.batch * t.rows * t.heads * t.dim >= kParallelFillElements) {
    t.fill_normal_parallel(rng(), scale);
    return;
  }
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int64_t b = 0; b < t.batch; ++b)
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t h = 0; h < t.heads; ++h)
        for (int64_t d = 0; d < t.dim; ++d) t.set(b, r, h, d, scale * dist(rng));  // set() rounds
}
}  // namespace

Problem::Problem(const ProblemSpec& s) : spec(s) {
  int64_t tb = spec.batch, rq = spec.seqlen_q, rk = spec.seqlen_k;
  if (!spec.lens_q.empty()) {
    spec.batch = static_cast<int64_t>(spec.lens_q.size());
    cu_seqlens_q.assign(1, 0);
    cu_seqlens_k.assign(1, 0);
    for (size_t i = 0; i < spec.lens_q.size(); ++i) {
      cu_seqlens_q.push_back(cu_seqlens_q.back() + spec.lens_q[i]);
      cu_seqlens_k.push_back(cu_seqlens_k.back() + spec.lens_k[i]);
    }
    spec.seqlen_q = *std::max_element(spec.lens_q.begin(), spec.lens_q.end());
    spec.seqlen_k = *std::max_element(spec.lens_k.begin(), spec.lens_k.end());
    tb = 1;
    rq = cu_seqlens_q.back();
    rk = cu_seqlens_k.back();
  }
  const DType dt = spec.dtype;
  q.allocate(dt, tb, rq, spec.heads_q, spec.head_dim, spec.row_pad);
  k.allocate(dt, tb, rk, spec.heads_kv, spec.head_dim, spec.row_pad);
  v.allocate(dt, tb, rk, spec.heads_kv, spec.head_dim, spec.row_pad);
  out.allocate(dt, tb, rq, spec.heads_q, spec.head_dim, spec.row_pad);
  dout.allocate(dt, tb, rq, spec.heads_q, spec.head_dim, spec.row_pad);
  dq.allocate(dt, tb, rq, spec.heads_q, spec.head_dim, spec.row_pad);
  dk.allocate(dt, tb, rk, spec.heads_kv, spec.head_dim, spec.row_pad);
  dv.allocate(dt, tb, rk, spec.heads_kv, spec.head_dim, spec.row_pad);
  std::mt19937_64 rng(spec.data_seed);
  fill_normal(q, rng, spec.input_scale);
  fill_normal(k, rng, 1.0f);
  fill_normal(v, rng, 1.0f);
  fill_normal(dout, rng, 1.0f);
  if (varlen()) {
    lse_batch_stride = 0;
    lse_head_stride = rq;
    lse.assign(static_cast<size_t>(std::max<int64_t>(spec.heads_q * rq, 1)), 0.0f);
  } else {
    lse_head_stride = spec.seqlen_q;
    lse_batch_stride = spec.heads_q * spec.seqlen_q;
    lse.assign(static_cast<size_t>(std::max<int64_t>(spec.batch * lse_batch_stride, 1)), 0.0f);
  }
  if (spec.alibi) {
    // The standard ALiBi slopes 2^(-8 h / H), h = 1..H.
    for (int64_t h = 0; h < spec.heads_q; ++h)
      alibi_slopes.push_back(std::pow(2.0f, -8.0f * static_cast<float>(h + 1) / spec.heads_q));
  }
  if (spec.sinks) {
    // Logits around the typical row LSE (log seqlen_k) so the sink holds a visible share of the
    // mass in some heads and little in others; drawn after the tensors (their values stay as without).
    std::normal_distribution<float> dist(0.0f, 1.5f);
    const float center = std::log(static_cast<float>(std::max<int64_t>(spec.seqlen_k, 1)));
    for (int64_t h = 0; h < spec.heads_q; ++h) sink_logits.push_back(center + dist(rng));
    dsink.assign(static_cast<size_t>(spec.heads_q), 0.0f);
  }
}

namespace {
void fill_config(const Problem& pb, AttentionConfig& c, Impl impl) {
  const ProblemSpec& s = pb.spec;
  c.dtype = s.dtype;
  c.device = Device::kCPU;
  c.impl = impl;
  c.batch = s.batch;
  c.seqlen_q = s.seqlen_q;
  c.seqlen_k = s.seqlen_k;
  c.heads_q = s.heads_q;
  c.heads_kv = s.heads_kv;
  c.head_dim = s.head_dim;
  if (s.softmax_scale > 0) c.softmax_scale = s.softmax_scale;
  c.softcap = s.softcap;
  c.alibi_slopes = s.alibi ? pb.alibi_slopes.data() : nullptr;
  c.alibi_batch_stride = 0;
  c.sink_logits = s.sinks ? pb.sink_logits.data() : nullptr;
  c.causal = s.causal;
  c.causal_align = s.causal_align;
  c.window_left = s.window_left;
  c.window_right = s.window_right;
  c.sink_tokens = s.sink_tokens;
  c.dropout_p = s.dropout_p;
  c.dropout_seed = s.dropout_seed;
  c.dropout_offset = s.dropout_offset;
  if (pb.varlen()) {
    c.cu_seqlens_q = pb.cu_seqlens_q.data();
    c.cu_seqlens_k = pb.cu_seqlens_k.data();
    c.total_q = pb.cu_seqlens_q.back();  // the packed tensors hold exactly the sequences' rows
    c.total_k = pb.cu_seqlens_k.back();
  }
}
}  // namespace

FwdParams Problem::fwd_params(Impl impl) const {
  FwdParams p;
  fill_config(*this, p, impl);
  p.q = q.ref();
  p.k = k.ref();
  p.v = v.ref();
  p.out = const_cast<HostTensor&>(out).mut();
  p.lse = const_cast<float*>(lse.data());
  p.lse_batch_stride = lse_batch_stride;
  p.lse_head_stride = lse_head_stride;
  return p;
}

BwdParams Problem::bwd_params(Impl impl) const {
  BwdParams p;
  fill_config(*this, p, impl);
  p.q = q.ref();
  p.k = k.ref();
  p.v = v.ref();
  p.out = out.ref();
  p.dout = dout.ref();
  p.lse = lse.data();
  p.lse_batch_stride = lse_batch_stride;
  p.lse_head_stride = lse_head_stride;
  p.dq = const_cast<HostTensor&>(dq).mut();
  p.dk = const_cast<HostTensor&>(dk).mut();
  p.dv = const_cast<HostTensor&>(dv).mut();
  p.dsink = spec.sinks ? const_cast<float*>(dsink.data()) : nullptr;
  return p;
}

void Problem::poison_forward_outputs() {
  out.fill_nan();
  std::fill(lse.begin(), lse.end(), std::numeric_limits<float>::quiet_NaN());
}
void Problem::poison_backward_outputs() {
  dq.fill_nan();
  dk.fill_nan();
  dv.fill_nan();
  std::fill(dsink.begin(), dsink.end(), std::numeric_limits<float>::quiet_NaN());
}

AttentionFlops Problem::flops() const {
  FwdParams p = fwd_params(Impl::kReference);
  return attention_flops(p, varlen() ? cu_seqlens_q.data() : nullptr,
                         varlen() ? cu_seqlens_k.data() : nullptr);
}

std::string ErrorStats::to_string() const {
  std::ostringstream os;
  os << "max_abs=" << max_abs << " rel_l2=" << rel_l2 << " nonfinite=" << nonfinite << "/" << count;
  return os.str();
}

ErrorStats compare(const HostTensor& got, const HostTensor& want) {
  ErrorStats e;
  double num = 0, den = 0;
  for (int64_t b = 0; b < want.batch; ++b)
    for (int64_t r = 0; r < want.rows; ++r)
      for (int64_t h = 0; h < want.heads; ++h)
        for (int64_t d = 0; d < want.dim; ++d) {
          const double g = got.get(b, r, h, d), w = want.get(b, r, h, d);
          ++e.count;
          if (!std::isfinite(g) && std::isfinite(w)) {
            ++e.nonfinite;
            continue;
          }
          const double diff = std::fabs(g - w);
          e.max_abs = std::max(e.max_abs, diff);
          num += diff * diff;
          den += w * w;
        }
  e.rel_l2 = std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
  return e;
}

ErrorStats compare_lse(const std::vector<float>& got, const std::vector<float>& want) {
  ErrorStats e;
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got[i], w = want[i];
    ++e.count;
    if (std::isinf(w) && w < 0) {  // fully masked row: must be exactly -inf
      if (!(std::isinf(g) && g < 0)) ++e.nonfinite;
      continue;
    }
    if (!std::isfinite(g)) {
      ++e.nonfinite;
      continue;
    }
    const double diff = std::fabs(g - w);
    e.max_abs = std::max(e.max_abs, diff);
    num += diff * diff;
    den += w * w;
  }
  e.rel_l2 = std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
  return e;
}

}  // namespace testing
}  // namespace flashlab
