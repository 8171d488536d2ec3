// tests/gpu/cuda_test_util.h — what the GPU tests of the production CUDA implementations share:
// the implementations this build compiled (each gets the sweeps), the error measure of the
// tolerance checks, environment knobs, the base configuration of the error tests, the sweeps'
// random draws, and the device side (a GPU probe, the padding check, the "not built" status; the
// device mirror of a problem is testing::DeviceProblem, src/testing/device_problem.h). Each test
// keeps its own tolerance rule and sweep (test_cuda_forward.cpp, test_cuda_backward.cpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "flashlab/flashlab.h"
#include "testing/problem.h"

#if defined(FLASHLAB_WITH_CUDA)
#include <cuda_runtime.h>

#include "testing/device_problem.h"
#endif

namespace flashlab {

// How GoogleTest prints an Impl parameter ("cuda_sm80"; found by argument-dependent lookup, so it
// lives in flashlab's namespace).
inline void PrintTo(Impl impl, std::ostream* os) {
  *os << to_string(impl);
}

namespace cuda_test {

using flashlab::testing::HostTensor;
using flashlab::testing::ProblemSpec;

// Whether `impl` has a backward pass at all (an implementation without one refuses every backward
// call, before any device query, with "the backward pass is not supported").
inline bool has_backward(Impl impl) {
  BwdParams p;
  p.device = Device::kCUDA;
  p.impl = impl;
  p.dtype = DType::kBFloat16;
  p.batch = 1;
  p.seqlen_q = p.seqlen_k = 128;
  p.heads_q = p.heads_kv = 1;
  p.head_dim = 128;
  int64_t bytes = 0;
  const Status st = backward_workspace_size(p, &bytes);
  return !(st.code() == StatusCode::kUnsupported && st.message().find("the backward pass") != std::string::npos);
}

// The production CUDA implementations this build compiled (cuda_sm80, cuda_sm90 where sm_90a is
// built), experimental ones included: every row of list_implementations() on device cuda named
// "cuda_*" (the learning kernels are learn_v*); for the backward sweeps only those with a backward.
// The GPU sweeps are instantiated once for each; rows are listed whether or not a GPU is present,
// so without one each instance skips.
inline std::vector<Impl> production_cuda_impls(bool backward = false) {
  std::vector<Impl> impls;
  for (const ImplInfo& info : list_implementations())
    if (info.device == Device::kCUDA && std::strncmp(info.name, "cuda_", 5) == 0 &&
        (!backward || has_backward(info.impl)))
      impls.push_back(info.impl);
  return impls;
}

// Test-name suffix of a parametrized test: the implementation's name ("Sweep/cuda_sm80").
inline std::string impl_test_name(const ::testing::TestParamInfo<Impl>& info) {
  return to_string(info.param);
}

inline int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// The problem both checkers' self-tests use: awkward lengths (113 queries, 203 keys), GQA 4/2,
// head_dim 72 (off the buckets), causal, inputs scaled by 2.
inline ProblemSpec checker_self_test_spec(DType dt) {
  ProblemSpec s;
  s.batch = 2;
  s.seqlen_q = 113;
  s.seqlen_k = 203;
  s.heads_q = 4;
  s.heads_kv = 2;
  s.head_dim = 72;
  s.dtype = dt;
  s.causal = true;
  s.input_scale = 2.0f;
  return s;
}

// The packed batch of both VarlenNeighbourNonFinite tests (forward and backward), whose middle
// sequence the test poisons: query lengths 77, 50, 130, key lengths 77, 150, 203 (the last
// sequence ends the packed tensors, the first has one after it), GQA 4 / 2.
inline ProblemSpec varlen_neighbour_spec(int64_t head_dim, bool causal, uint64_t data_seed) {
  ProblemSpec s;
  s.lens_q = {77, 50, 130};
  s.lens_k = {77, 150, 203};
  s.seqlen_q = 130;
  s.seqlen_k = 203;
  s.heads_q = 4;
  s.heads_kv = 2;
  s.head_dim = head_dim;
  s.causal = causal;
  s.data_seed = data_seed;
  return s;
}

inline double unit_roundoff(DType d) {
  return d == DType::kBFloat16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
}

// ---- The error measure (host only) ---------------------------------------------------------------

struct Errors {
  double max_abs = 0, sq = 0, ref_sq = 0, ref_max = 0;
  int64_t nonfinite = 0;
  double rel_l2() const { return ref_sq > 0 ? std::sqrt(sq / ref_sq) : std::sqrt(sq); }
};

// Error of `got` (or, with round_to_dtype, of exact rounded to `dtype`) against `exact`.
inline Errors measure(const HostTensor& got, const HostTensor& exact, bool round_to_dtype, DType dtype) {
  Errors e;
  for (int64_t b = 0; b < exact.batch; ++b)
    for (int64_t r = 0; r < exact.rows; ++r)
      for (int64_t h = 0; h < exact.heads; ++h)
        for (int64_t d = 0; d < exact.dim; ++d) {
          const double want = exact.get(b, r, h, d);
          const double g =
              round_to_dtype ? flashlab::round_to(dtype, static_cast<float>(want)) : got.get(b, r, h, d);
          if (!std::isfinite(g)) {
            ++e.nonfinite;
            continue;
          }
          const double diff = std::fabs(g - want);
          e.max_abs = std::max(e.max_abs, diff);
          e.sq += diff * diff;
          e.ref_sq += want * want;
          e.ref_max = std::max(e.ref_max, std::fabs(want));
        }
  return e;
}

// The configuration cuda_sm80's error tests start from (each then breaks one rule).
inline AttentionConfig sm80_config() {
  AttentionConfig c;
  c.device = Device::kCUDA;
  c.impl = Impl::kCudaSm80;
  c.dtype = DType::kBFloat16;
  c.batch = 2;
  c.seqlen_q = c.seqlen_k = 128;
  c.heads_q = c.heads_kv = 4;
  c.head_dim = 128;
  return c;
}

// ---- The sweeps' random configurations ----------------------------------------------------------
// One generator per sweep: the order of the draws fixes the configurations a seed gives.

inline int64_t draw_pick(std::mt19937_64& rng, std::initializer_list<int64_t> v) {
  return *(v.begin() + std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng));
}
inline bool draw_chance(std::mt19937_64& rng, double p) {
  return std::uniform_real_distribution<double>(0, 1)(rng) < p;
}

// What the forward and backward sweeps draw alike once the shape is chosen: batch, the mask (causal
// in both alignments, windows, sink tokens), softcap, ALiBi, dropout, varlen with empty and
// length-1 sequences, padded rows, peaky inputs and the softmax scale (*scale stays NaN, the
// default, mostly).
inline void draw_features(std::mt19937_64& rng, ProblemSpec& s, float* scale) {
  auto pick = [&](std::initializer_list<int64_t> v) { return draw_pick(rng, v); };
  auto chance = [&](double p) { return draw_chance(rng, p); };
  s.batch = pick({1, 2, 3});
  const int mask = static_cast<int>(pick({0, 0, 1, 1, 2, 3}));
  s.causal = mask == 1 || mask == 3;
  s.causal_align = chance(0.5) ? CausalAlign::kBottomRight : CausalAlign::kTopLeft;
  if (mask >= 2) {
    s.window_left = pick({-1, 0, 5, 64, 300});
    s.window_right = s.causal ? -1 : pick({-1, 0, 7, 100});
  }
  if (chance(0.15)) s.softcap = chance(0.5) ? 5.0f : 30.0f;
  s.alibi = chance(0.15);
  s.sinks = chance(0.15);  // attention sinks (and dsink in the backward)
  if (chance(0.15)) s.dropout_p = static_cast<float>(pick({10, 30, 75})) / 100.0f;
  s.dropout_seed = rng();
  s.dropout_offset = chance(0.5) ? 0 : rng() >> 20;
  // Varlen, empty and length-1 sequences included; FLASHLAB_SWEEP_VARLEN=1 (sweeps and sanitizer
  // runs aimed at the varlen kernels): every draw (the draws after this point change too).
  if (chance(0.2) || env_int("FLASHLAB_SWEEP_VARLEN", 0) != 0) {
    const int n = static_cast<int>(pick({1, 2, 3, 4}));
    for (int i = 0; i < n; ++i) {
      s.lens_q.push_back(static_cast<int32_t>(pick({0, 1, 17, 64, 113, 203, 300})));
      s.lens_k.push_back(static_cast<int32_t>(pick({0, 1, 17, 64, 113, 203, 300})));
    }
  }
  if (chance(0.25)) s.row_pad = 8 * pick({1, 3});  // multiples of 8 keep 16-byte row alignment
  s.input_scale = chance(0.2) ? 4.0f : 1.0f;       // peaky softmax rows
  if (chance(0.05)) *scale = chance(0.5) ? 0.0f : -0.09f;
  // StreamingLLM sink tokens beside a left window (cuda_sm80, cuda_sm90's backward and its forward up
  // to head dim 192; where an impl refuses them the sweep counts the draw as left to another impl);
  // more than one 64-key block of them too. Without a left window they change no mask
  // (test_cuda_forward.cpp SinkTokensWithoutLeftWindow).
  if (s.window_left >= 0 && chance(0.5)) s.sink_tokens = pick({1, 4, 70});
  // FLASHLAB_SWEEP_SINK_TOKENS=1 (sweeps and sanitizer runs aimed at the sink-token kernels): every
  // draw gets a left window and sink tokens (the draws after this point change too).
  if (env_int("FLASHLAB_SWEEP_SINK_TOKENS", 0) != 0) {
    if (s.window_left < 0) s.window_left = pick({0, 5, 64, 300});
    s.sink_tokens = pick({1, 4, 70, 200});
  }
}

// Caps every length at `cap` (sanitizer runs are tens of times slower per launch), then keeps the
// float64 reference affordable: at most `macs` multiply-adds per product, by dropping whole
// query-head groups, then batch entries.
inline void cap_and_fit(ProblemSpec& s, int64_t cap, int64_t macs) {
  s.seqlen_q = std::min(s.seqlen_q, cap);
  s.seqlen_k = std::min(s.seqlen_k, cap);
  for (auto& l : s.lens_q) l = static_cast<int32_t>(std::min<int64_t>(l, cap));
  for (auto& l : s.lens_k) l = static_cast<int32_t>(std::min<int64_t>(l, cap));
  while (s.batch * s.heads_q * s.seqlen_q * s.seqlen_k * s.head_dim > macs && s.heads_q > s.heads_kv)
    s.heads_q -= s.heads_kv;
  while (s.batch * s.heads_q * s.seqlen_q * s.seqlen_k * s.head_dim > macs && s.batch > 1) --s.batch;
}

#if defined(FLASHLAB_WITH_CUDA)

inline bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// Elements of `t` outside its logical (batch, rows, heads, dim) that no longer hold the 0xFFFF poison.
inline int64_t written_padding(const HostTensor& t) {
  std::vector<char> logical(t.bytes.size() / 2, 0);
  for (int64_t b = 0; b < t.batch; ++b)
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t h = 0; h < t.heads; ++h)
        for (int64_t d = 0; d < t.dim; ++d) logical[t.index(b, r, h, d)] = 1;
  int64_t n = 0;
  for (size_t i = 0; i < logical.size(); ++i) {
    uint16_t w;
    std::memcpy(&w, t.bytes.data() + 2 * i, 2);
    if (!logical[i] && w != 0xffffu) ++n;
  }
  return n;
}

// A feature the implementation leaves to another one (cuda_sm90: dropout, varlen -> cuda_sm80):
// the sweep counts these configurations apart; kAuto's routing is tested on its own (AutoPicks).
inline bool routed_elsewhere(const Status& st) {
  return st.code() == StatusCode::kUnsupported && st.message().find("impl=auto picks") != std::string::npos;
}

inline bool not_built(const Status& st) {
  return st.code() == StatusCode::kUnsupported &&
         st.message().find("not compiled into this build") != std::string::npos;
}

#endif  // FLASHLAB_WITH_CUDA

}  // namespace cuda_test
}  // namespace flashlab
