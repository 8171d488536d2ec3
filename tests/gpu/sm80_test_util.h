// tests/gpu/sm80_test_util.h — what the cuda_sm80 GPU tests share: the error measure of the
// tolerance checks, environment knobs, the base configuration of the error tests, and the device
// side (a GPU probe, device buffers, the padding check, the "not built" status). Each test keeps its
// own tolerance rule and sweep (test_sm80_forward.cpp, test_sm80_backward.cpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "flashlab/flashlab.h"
#include "testing/problem.h"

#if defined(FLASHLAB_WITH_CUDA)
#include <cuda_runtime.h>
#endif

namespace flashlab {
namespace sm80_test {

using flashlab::testing::HostTensor;

inline int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
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

// The configuration the error tests start from (each then breaks one rule).
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

#if defined(FLASHLAB_WITH_CUDA)

inline bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t n) : bytes(n) {
    if (n) {
      EXPECT_EQ(cudaMalloc(&ptr, n), cudaSuccess);
    }
  }
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void upload(const void* h) {
    if (bytes) {
      EXPECT_EQ(cudaMemcpy(ptr, h, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  void download(void* h) const {
    if (bytes) {
      EXPECT_EQ(cudaMemcpy(h, ptr, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    }
  }
  void poison() {
    if (bytes) {
      EXPECT_EQ(cudaMemset(ptr, 0xff, bytes), cudaSuccess);
    }
  }
};

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

inline bool not_built(const Status& st) {
  return st.code() == StatusCode::kUnsupported &&
         st.message().find("not compiled into this build") != std::string::npos;
}

#endif  // FLASHLAB_WITH_CUDA

}  // namespace sm80_test
}  // namespace flashlab
