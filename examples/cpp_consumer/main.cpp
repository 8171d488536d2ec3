// examples/cpp_consumer/main.cpp — a program built against an INSTALLED flashlab (find_package).
//
// One small CPU forward pass (fp32, GQA, causal), checked against a naive computation of the same
// attention. Exit code 0 when they agree, 1 otherwise. tools/test_install.sh builds and runs it;
// the README's C++ snippet is the part between the "README" markers.
#include <flashlab/flashlab.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <type_traits>
#include <vector>

// A writable buffer may be passed as an input too: contiguous(float*, ...) gives a MutTensorRef,
// which converts to the TensorRef that p.q, p.k, p.v take.
static_assert(std::is_convertible_v<flashlab::MutTensorRef, flashlab::TensorRef>);

int main() {
  const int64_t batch = 2, seqlen_q = 5, seqlen_k = 7, heads_q = 4, heads_kv = 2, head_dim = 16;
  std::mt19937 rng(0);
  std::normal_distribution<float> normal;
  const auto randn = [&](int64_t seqlen, int64_t heads) {
    std::vector<float> x(batch * seqlen * heads * head_dim);
    for (float& e : x) e = normal(rng);
    return x;
  };
  const std::vector<float> q = randn(seqlen_q, heads_q), k = randn(seqlen_k, heads_kv),
                           v = randn(seqlen_k, heads_kv);
  std::vector<float> out(q.size()), lse(batch * heads_q * seqlen_q);

  // clang-format off
  // ---- README begin
  flashlab::FwdParams p;
  p.dtype = flashlab::DType::kFloat32;  // CPU: fp32, fp16, bf16
  p.device = flashlab::Device::kCPU;
  p.batch = batch; p.seqlen_q = seqlen_q; p.seqlen_k = seqlen_k;
  p.heads_q = heads_q; p.heads_kv = heads_kv; p.head_dim = head_dim;
  // (batch, seqlen, heads, head_dim), contiguous; strides in elements
  p.q = flashlab::contiguous(q.data(), p.seqlen_q, p.heads_q, p.head_dim);
  p.k = flashlab::contiguous(k.data(), p.seqlen_k, p.heads_kv, p.head_dim);
  p.v = flashlab::contiguous(v.data(), p.seqlen_k, p.heads_kv, p.head_dim);
  p.out = flashlab::contiguous(out.data(), p.seqlen_q, p.heads_q, p.head_dim);
  p.lse = lse.data(); p.lse_head_stride = p.seqlen_q; p.lse_batch_stride = p.heads_q * p.seqlen_q;
  p.causal = true;  // bottom-right aligned, as in flash-attn
  flashlab::Status st = flashlab::attention_forward(p);  // nothing is written when !st.ok()
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.to_string().c_str());
    return 1;
  }
  // ---- README end
  // clang-format on

  // Naive attention in double: softmax(q·kᵀ / sqrt(d)) v, key j visible iff j <= i + (sk - sq).
  double max_err = 0;
  const double scale = 1.0 / std::sqrt(double(head_dim));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads_q; ++h)
      for (int64_t i = 0; i < seqlen_q; ++i) {
        const int64_t hk = h / (heads_q / heads_kv);
        const float* qi = &q[((b * seqlen_q + i) * heads_q + h) * head_dim];
        std::vector<double> s;
        double m = -INFINITY;
        for (int64_t j = 0; j <= i + (seqlen_k - seqlen_q) && j < seqlen_k; ++j) {
          const float* kj = &k[((b * seqlen_k + j) * heads_kv + hk) * head_dim];
          double dot = 0;
          for (int64_t d = 0; d < head_dim; ++d) dot += double(qi[d]) * kj[d];
          s.push_back(dot * scale);
          m = std::fmax(m, s.back());
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - m));
        for (int64_t d = 0; d < head_dim; ++d) {
          double o = 0;
          for (size_t j = 0; j < s.size(); ++j)
            o += s[j] / sum * v[((b * seqlen_k + j) * heads_kv + hk) * head_dim + d];
          max_err = std::fmax(max_err, std::fabs(o - out[((b * seqlen_q + i) * heads_q + h) * head_dim + d]));
        }
        max_err = std::fmax(max_err, std::fabs(m + std::log(sum) - lse[(b * heads_q + h) * seqlen_q + i]));
      }
  const bool ok = max_err < 1e-4;
  std::printf("flashlab %s (%s): causal GQA forward, max |error| vs naive = %.2e: %s\n",
              flashlab::build_info().version.c_str(), flashlab::to_string(flashlab::Impl::kAuto), max_err,
              ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
