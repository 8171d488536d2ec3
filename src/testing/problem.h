// src/testing/problem.h — host-side attention problems for tests and the CLI benchmark.
//
// A Problem owns randomly filled q, k, v (values already rounded to the dtype, so a float64
// reference sees exactly what a kernel sees), dout for the backward pass, output buffers, optional
// ALiBi slopes and variable-length offsets, and builds FwdParams / BwdParams pointing at them.
// Outputs can be poisoned (NaN) before a run so unwritten elements are caught.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashlab/flashlab.h"

namespace flashlab {
namespace testing {

struct ProblemSpec {
  int64_t batch = 1;
  int64_t seqlen_q = 128;
  int64_t seqlen_k = 128;
  int64_t heads_q = 4;
  int64_t heads_kv = 4;
  int64_t head_dim = 64;
  DType dtype = DType::kBFloat16;
  bool causal = false;
  CausalAlign causal_align = CausalAlign::kBottomRight;
  int64_t window_left = -1;
  int64_t window_right = -1;
  int64_t sink_tokens = 0;     // StreamingLLM sink tokens (not the sink logits below)
  float softcap = 0.0f;
  bool alibi = false;
  bool sinks = false;          // attention sinks: sink_logits per query head, and dsink in backward
  float softmax_scale = 0.0f;  // 0: the API default 1/sqrt(head_dim)
  float dropout_p = 0.0f;
  uint64_t dropout_seed = 0x1234abcdULL;
  uint64_t dropout_offset = 0;
  // Variable-length batch: when non-empty, batch = lens_q.size() and tensors are packed.
  std::vector<int32_t> lens_q;
  std::vector<int32_t> lens_k;
  int64_t row_pad = 0;       // extra elements after each head row group: non-contiguous strides
  uint64_t data_seed = 42;   // inputs are drawn from N(0, 1) with this seed
  float input_scale = 1.0f;  // multiplies q (larger -> peakier softmax)

  std::string describe() const;  // "b2 sq17 sk113 hq8 hkv2 d64 bf16 causal(br) ..."
};

// One tensor in host memory: (rows, heads, head_dim) per sequence, any dtype, padded rows allowed.
struct HostTensor {
  DType dtype = DType::kFloat32;
  int64_t batch = 0, rows = 0, heads = 0, dim = 0;  // rows = per-sequence rows, or total if packed
  int64_t batch_stride = 0, row_stride = 0, head_stride = 0;
  std::vector<unsigned char> bytes;

  void allocate(DType dt, int64_t batch, int64_t rows, int64_t heads, int64_t dim, int64_t row_pad);
  void* data() { return bytes.data(); }
  const void* data() const { return bytes.data(); }
  int64_t index(int64_t b, int64_t r, int64_t h, int64_t d) const {
    return b * batch_stride + r * row_stride + h * head_stride + d;
  }
  float get(int64_t b, int64_t r, int64_t h, int64_t d) const;
  void set(int64_t b, int64_t r, int64_t h, int64_t d, float v);
  void fill_nan();  // every byte pattern of the buffer, padding included, becomes NaN
  // N(0, scale²) values rounded to the dtype, on every core (OpenMP): a generator per chunk of 64
  // rows (over batch x rows), seeded from `seed` and the chunk's index, so the values depend on the
  // seed only, not on the thread count. For the large inputs of the CLI's benchmarks.
  void fill_normal_parallel(uint64_t seed, float scale = 1.0f);
  double max_abs_value() const;  // max |x| over the logical elements (padding excluded)
  TensorRef ref() const { return TensorRef{data(), batch_stride, row_stride, head_stride, 1}; }
  MutTensorRef mut() { return MutTensorRef{data(), batch_stride, row_stride, head_stride, 1}; }
};

struct Problem {
  ProblemSpec spec;
  HostTensor q, k, v, out, dout, dq, dk, dv;
  std::vector<float> lse;               // (batch, heads_q, seqlen_q) or (heads_q, total_q)
  int64_t lse_batch_stride = 0, lse_head_stride = 0;
  std::vector<float> alibi_slopes;      // heads_q (shared across batch) when spec.alibi
  std::vector<float> sink_logits;       // heads_q when spec.sinks
  std::vector<float> dsink;             // heads_q when spec.sinks: the backward's output
  std::vector<int32_t> cu_seqlens_q, cu_seqlens_k;

  explicit Problem(const ProblemSpec& spec);  // allocates and fills inputs

  FwdParams fwd_params(Impl impl) const;  // points into this problem's buffers
  BwdParams bwd_params(Impl impl) const;
  void poison_forward_outputs();           // out and lse = NaN
  void poison_backward_outputs();          // dq, dk, dv (and dsink) = NaN
  bool varlen() const { return !spec.lens_q.empty(); }
  AttentionFlops flops() const;
};

// Error of `got` against `want` over the logical elements (padding ignored).
struct ErrorStats {
  double max_abs = 0;
  double rel_l2 = 0;       // ||got - want|| / max(||want||, tiny)
  int64_t nonfinite = 0;   // NaN/inf in `got` where `want` is finite (includes unwritten elements)
  int64_t count = 0;
  bool finite() const { return nonfinite == 0; }
  std::string to_string() const;
};
ErrorStats compare(const HostTensor& got, const HostTensor& want);
// LSE: -inf must match -inf exactly; elsewhere absolute error.
ErrorStats compare_lse(const std::vector<float>& got, const std::vector<float>& want);

}  // namespace testing
}  // namespace flashlab
