// learn/harness.cuh — the shared plumbing of the learning-path programs (llm.c's dev/cuda/common.h).
//
// attention_forward.cu and attention_backward.cu include this header (and learn/program.cuh, the
// plumbing of their main(): command line, validation tally, timing sweep, progression table). It
// holds everything that is *not* the lesson: error checks, device buffers, random inputs, running a
// version, validation against the float64 CPU reference, timing, the tensor-core peak and memory
// accounting.
//
//   1. errors         LEARN_CHECK(expr) prints "file:line: expr: error" and yields false
//   2. buffers        DeviceBuffer (RAII, poison = NaN bytes), fill_random_device, count_nonfinite
//   3. problems       DeviceProblem mirrors a testing::Problem on the GPU and builds Fwd/BwdParams;
//                     TimingProblem is a large problem filled on the device (no host copy)
//   4. running        run_forward / run_backward: learn_supports + learn_forward/learn_backward
//   5. validation     reference_forward (Impl::kReference, float64), lowp_forward_baseline,
//                     judge(): err <= 2 * same-precision-baseline err + floor, NaN never passes;
//                     parallel_for (the CPU baselines' threads)
//   6. shapes         validation_specs() (awkward shapes), timing_specs() (the standard shape)
//   7. timing         time_ms(): warm-up, L2 flush before every rep, CUDA events, median
//   8. peak, memory   measure_bf16_peak_tflops() (cublasGemmEx 8192^3), PoolPeak (extra memory),
//                     keep_pool_memory()
//   9. printing       Args (--flag value), fmt_bytes, tflops
//
// Stability: the backward program includes this header too. Add functions; do not change the
// signatures below.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api/backend.h"
#include "flashlab/flashlab.h"
#include "flashlab/mask.h"
#include "kernels/common.cuh"
#include "testing/problem.h"

namespace flashlab {
namespace learn {

// =============================================================================================
// 1. Errors. Programs print and carry on (a failing case is reported, the next one runs).
// =============================================================================================
inline bool cuda_ok(cudaError_t e, const char* expr, const char* file, int line) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "%s:%d: %s: %s (%s)\n", file, line, expr, cudaGetErrorName(e),
               cudaGetErrorString(e));
  return false;
}
inline bool cublas_ok(cublasStatus_t e, const char* expr, const char* file, int line) {
  if (e == CUBLAS_STATUS_SUCCESS) return true;
  std::fprintf(stderr, "%s:%d: %s: cuBLAS status %d\n", file, line, expr, static_cast<int>(e));
  return false;
}
// Both evaluate to a bool: `if (!LEARN_CHECK(cudaMalloc(&p, n))) return false;`
#define LEARN_CHECK(expr) ::flashlab::learn::cuda_ok((expr), #expr, __FILE__, __LINE__)
#define LEARN_CHECK_CUBLAS(expr) ::flashlab::learn::cublas_ok((expr), #expr, __FILE__, __LINE__)

// =============================================================================================
// 2. Device buffers
// =============================================================================================
// Not testing::DeviceBuffer / DeviceProblem (src/testing/device_problem.h, what tests/gpu and the
// CLI share), on purpose: this harness is the whole plumbing of the lessons in one header, in the
// programs' style. Errors print file:line and yield false (a failing case is reported, the next
// one runs) instead of a Status; allocations are at least 16 bytes, so empty tensors still get a
// valid pointer; poison is asynchronous on the caller's stream; the same buffers back the
// device-only TimingProblem, the L2 flusher and the cuBLAS peak; and DeviceProblem's params name
// a learning version (Impl from the version number, ALiBi and varlen dropped) for the backend hooks.
// The signatures are fixed for both programs (see "Stability" above).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; o.bytes_ = 0; }
  ~DeviceBuffer() { reset(); }

  // Allocates (at least 16 bytes, so empty tensors still get a valid pointer).
  bool allocate(size_t bytes) {
    reset();
    if (!LEARN_CHECK(cudaMalloc(&ptr_, std::max<size_t>(bytes, 16)))) {
      ptr_ = nullptr;
      return false;
    }
    bytes_ = bytes;
    return true;
  }
  void reset() {
    if (ptr_) cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  bool upload(const void* host, size_t bytes) {
    return allocate(bytes) && LEARN_CHECK(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice));
  }
  bool download(void* host, size_t bytes) const {
    return LEARN_CHECK(cudaMemcpy(host, ptr_, std::min(bytes, bytes_), cudaMemcpyDeviceToHost));
  }
  // 0xFF bytes are NaN in fp32, fp16 and bf16 alike: an element the kernel never writes stays NaN.
  bool poison(cudaStream_t s = nullptr) { return LEARN_CHECK(cudaMemsetAsync(ptr_, 0xFF, bytes_, s)); }

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

namespace harness_detail {
__device__ inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
// N(0, scale^2) by Box-Muller on a counter hash, rounded to the element type: fresh random data
// that is never zero and costs no host time (a 16k-token problem is 100M elements per tensor set).
__global__ void fill_normal_kernel(void* ptr, int dtype, int64_t n, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t r = splitmix64(seed ^ splitmix64(static_cast<uint64_t>(i)));
    const float u1 = (static_cast<float>(r >> 40) + 1.0f) * (1.0f / 16777217.0f);  // (0, 1]
    const float u2 = static_cast<float>((r >> 8) & 0xffffff) * (1.0f / 16777216.0f);
    const float x = scale * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    if (dtype == static_cast<int>(DType::kFloat16)) static_cast<__half*>(ptr)[i] = __float2half_rn(x);
    else if (dtype == static_cast<int>(DType::kBFloat16)) static_cast<__nv_bfloat16*>(ptr)[i] = __float2bfloat16_rn(x);
    else static_cast<float*>(ptr)[i] = x;
  }
}
__global__ void count_nonfinite_kernel(const void* ptr, int dtype, int64_t n, unsigned long long* count) {
  unsigned long long local = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float x;
    if (dtype == static_cast<int>(DType::kFloat16)) x = __half2float(static_cast<const __half*>(ptr)[i]);
    else if (dtype == static_cast<int>(DType::kBFloat16)) x = __bfloat162float(static_cast<const __nv_bfloat16*>(ptr)[i]);
    else x = static_cast<const float*>(ptr)[i];
    if (!isfinite(x)) ++local;
  }
  if (local) atomicAdd(count, local);
}
}  // namespace harness_detail

// Fills n elements of `dtype` with N(0, scale^2) values drawn from `seed`.
inline bool fill_random_device(void* ptr, DType dtype, int64_t n, uint64_t seed, float scale = 1.0f,
                               cudaStream_t s = nullptr) {
  if (n <= 0) return true;
  const int blocks = static_cast<int>(std::min<int64_t>((n + 255) / 256, 65536));
  harness_detail::fill_normal_kernel<<<blocks, 256, 0, s>>>(ptr, static_cast<int>(dtype), n, seed, scale);
  return LEARN_CHECK(cudaGetLastError());
}
// Counts NaN/inf among n elements (the full buffer: -inf entries of LSE count too). -1 on error.
inline int64_t count_nonfinite(const void* ptr, DType dtype, int64_t n) {
  unsigned long long* d = nullptr;
  if (!LEARN_CHECK(cudaMalloc(&d, sizeof(*d)))) return -1;
  unsigned long long h = 0;
  bool ok = LEARN_CHECK(cudaMemset(d, 0, sizeof(*d)));
  if (ok && n > 0) {
    const int blocks = static_cast<int>(std::min<int64_t>((n + 255) / 256, 4096));
    harness_detail::count_nonfinite_kernel<<<blocks, 256>>>(ptr, static_cast<int>(dtype), n, d);
    ok = LEARN_CHECK(cudaGetLastError());
  }
  ok = ok && LEARN_CHECK(cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost));
  cudaFree(d);
  return ok ? static_cast<int64_t>(h) : -1;
}

// A fresh seed for every run (printed by the programs, so a failure can be replayed with --seed).
inline uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
         static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

// =============================================================================================
// 3. Problems on the device
// =============================================================================================

// Fills the API fields that differ between the host problem and its device mirror.
inline void point_at_device(AttentionConfig& c, int version, cudaStream_t s) {
  c.device = Device::kCUDA;
  c.impl = static_cast<Impl>(static_cast<int>(Impl::kLearnV0) + version);
  c.stream = s;
  c.alibi_slopes = nullptr;  // the learning kernels take no ALiBi (learn_supports says so)
  c.cu_seqlens_q = nullptr;  // nor variable-length batches
  c.cu_seqlens_k = nullptr;
  if (!std::isfinite(c.softmax_scale)) c.softmax_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
}

// A testing::Problem mirrored on the GPU, same strides (row padding included).
struct DeviceProblem {
  DeviceBuffer q, k, v, out, lse, dout, dq, dk, dv;

  // Uploads q, k, v, dout (and the host out/lse, so a backward test can start from reference
  // forward outputs); allocates dq, dk, dv.
  bool upload(const testing::Problem& pb) {
    return q.upload(pb.q.data(), pb.q.bytes.size()) && k.upload(pb.k.data(), pb.k.bytes.size()) &&
           v.upload(pb.v.data(), pb.v.bytes.size()) && dout.upload(pb.dout.data(), pb.dout.bytes.size()) &&
           upload_forward_outputs(pb) && dq.allocate(pb.dq.bytes.size()) &&
           dk.allocate(pb.dk.bytes.size()) && dv.allocate(pb.dv.bytes.size());
  }
  bool upload_forward_outputs(const testing::Problem& pb) {
    return out.upload(pb.out.data(), pb.out.bytes.size()) &&
           lse.upload(pb.lse.data(), pb.lse.size() * sizeof(float));
  }
  bool poison_forward() { return out.poison() && lse.poison() && LEARN_CHECK(cudaDeviceSynchronize()); }
  bool poison_backward() {
    return dq.poison() && dk.poison() && dv.poison() && LEARN_CHECK(cudaDeviceSynchronize());
  }
  bool download_forward(testing::Problem& pb) const {
    return out.download(pb.out.data(), pb.out.bytes.size()) &&
           lse.download(pb.lse.data(), pb.lse.size() * sizeof(float));
  }
  bool download_backward(testing::Problem& pb) const {
    return dq.download(pb.dq.data(), pb.dq.bytes.size()) && dk.download(pb.dk.data(), pb.dk.bytes.size()) &&
           dv.download(pb.dv.data(), pb.dv.bytes.size());
  }

  FwdParams fwd_params(const testing::Problem& pb, int version, cudaStream_t s = nullptr) const {
    FwdParams p = pb.fwd_params(Impl::kReference);  // shapes, strides, flags from the host problem
    point_at_device(p, version, s);
    p.q.ptr = q.get();
    p.k.ptr = k.get();
    p.v.ptr = v.get();
    p.out.ptr = out.get();
    p.lse = lse.as<float>();
    return p;
  }
  BwdParams bwd_params(const testing::Problem& pb, int version, cudaStream_t s = nullptr) const {
    BwdParams p = pb.bwd_params(Impl::kReference);
    point_at_device(p, version, s);
    p.q.ptr = q.get();
    p.k.ptr = k.get();
    p.v.ptr = v.get();
    p.out.ptr = out.get();
    p.dout.ptr = dout.get();
    p.lse = lse.as<float>();
    p.dq.ptr = dq.get();
    p.dk.ptr = dk.get();
    p.dv.ptr = dv.get();
    return p;
  }
};

// A large contiguous problem filled on the device, for timing (no CPU reference at this size).
struct TimingProblem {
  testing::ProblemSpec spec;
  DeviceBuffer q, k, v, out, lse, dout, dq, dk, dv;

  bool init(const testing::ProblemSpec& s, bool backward, uint64_t seed) {
    spec = s;
    const int64_t es = dtype_size(s.dtype);
    const int64_t nq = s.batch * s.seqlen_q * s.heads_q * s.head_dim;
    const int64_t nk = s.batch * s.seqlen_k * s.heads_kv * s.head_dim;
    bool ok = q.allocate(nq * es) && k.allocate(nk * es) && v.allocate(nk * es) && out.allocate(nq * es) &&
              lse.allocate(s.batch * s.heads_q * s.seqlen_q * sizeof(float)) &&
              fill_random_device(q.get(), s.dtype, nq, seed + 1, s.input_scale) &&
              fill_random_device(k.get(), s.dtype, nk, seed + 2) && fill_random_device(v.get(), s.dtype, nk, seed + 3);
    if (ok && backward) {
      ok = dout.allocate(nq * es) && dq.allocate(nq * es) && dk.allocate(nk * es) && dv.allocate(nk * es) &&
           fill_random_device(dout.get(), s.dtype, nq, seed + 4);
    }
    return ok && LEARN_CHECK(cudaDeviceSynchronize());
  }
  AttentionConfig config(int version, cudaStream_t s = nullptr) const {
    AttentionConfig c;
    c.dtype = spec.dtype;
    c.batch = spec.batch;
    c.seqlen_q = spec.seqlen_q;
    c.seqlen_k = spec.seqlen_k;
    c.heads_q = spec.heads_q;
    c.heads_kv = spec.heads_kv;
    c.head_dim = spec.head_dim;
    c.causal = spec.causal;
    c.causal_align = spec.causal_align;
    if (spec.softmax_scale > 0) c.softmax_scale = spec.softmax_scale;
    point_at_device(c, version, s);
    return c;
  }
  FwdParams fwd_params(int version, cudaStream_t s = nullptr) const {
    FwdParams p;
    static_cast<AttentionConfig&>(p) = config(version, s);
    p.q = contiguous(static_cast<const void*>(q.get()), spec.seqlen_q, spec.heads_q, spec.head_dim);
    p.k = contiguous(static_cast<const void*>(k.get()), spec.seqlen_k, spec.heads_kv, spec.head_dim);
    p.v = contiguous(static_cast<const void*>(v.get()), spec.seqlen_k, spec.heads_kv, spec.head_dim);
    p.out = contiguous(out.get(), spec.seqlen_q, spec.heads_q, spec.head_dim);
    p.lse = lse.as<float>();
    p.lse_head_stride = spec.seqlen_q;
    p.lse_batch_stride = spec.heads_q * spec.seqlen_q;
    return p;
  }
  BwdParams bwd_params(int version, cudaStream_t s = nullptr) const {
    BwdParams p;
    static_cast<AttentionConfig&>(p) = config(version, s);
    p.q = contiguous(static_cast<const void*>(q.get()), spec.seqlen_q, spec.heads_q, spec.head_dim);
    p.k = contiguous(static_cast<const void*>(k.get()), spec.seqlen_k, spec.heads_kv, spec.head_dim);
    p.v = contiguous(static_cast<const void*>(v.get()), spec.seqlen_k, spec.heads_kv, spec.head_dim);
    p.out = contiguous(static_cast<const void*>(out.get()), spec.seqlen_q, spec.heads_q, spec.head_dim);
    p.dout = contiguous(static_cast<const void*>(dout.get()), spec.seqlen_q, spec.heads_q, spec.head_dim);
    p.lse = lse.as<float>();
    p.lse_head_stride = spec.seqlen_q;
    p.lse_batch_stride = spec.heads_q * spec.seqlen_q;
    p.dq = contiguous(dq.get(), spec.seqlen_q, spec.heads_q, spec.head_dim);
    p.dk = contiguous(dk.get(), spec.seqlen_k, spec.heads_kv, spec.head_dim);
    p.dv = contiguous(dv.get(), spec.seqlen_k, spec.heads_kv, spec.head_dim);
    return p;
  }
};

// =============================================================================================
// 4. Running a version (directly through the backend hooks, so the programs test the kernels
//    whatever state the dispatcher is in; `flashlab bench` reaches the same code via the API).
// =============================================================================================
inline Status run_forward(int version, const FwdParams& p) {
  FLASHLAB_RETURN_IF_ERROR(detail::learn_supports(version, p, /*backward=*/false));
  return detail::learn_forward(version, p);
}
inline Status run_backward(int version, const BwdParams& p) {
  FLASHLAB_RETURN_IF_ERROR(detail::learn_supports(version, p, /*backward=*/true));
  return detail::learn_backward(version, p);
}

// =============================================================================================
// 5. Validation
// =============================================================================================

// The float64 CPU reference (Impl::kReference) into pb.out / pb.lse.
inline Status reference_forward(testing::Problem& pb) {
  return attention_forward(pb.fwd_params(Impl::kReference));
}
inline Status reference_backward(testing::Problem& pb) {
  return attention_backward(pb.bwd_params(Impl::kReference));
}

// Calls work(i) for i in [0, n) on up to one thread per core, item i on thread i % threads (the
// CPU baselines' loops over (batch, head): each item writes only its own outputs).
template <typename F>
void parallel_for(int64_t n, const F& work) {
  const int64_t nt = std::max<int64_t>(1, std::min<int64_t>(n, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (int64_t t = 0; t < nt; ++t)
    threads.emplace_back([&, t] {
      for (int64_t i = t; i < n; i += nt) work(i);
    });
  for (auto& th : threads) th.join();
}

// A same-precision baseline for the forward pass: what a correct kernel that keeps scores and sums
// in fp32 but feeds P to the P.V product in the element type (as tensor-core kernels do) gets.
// Its distance to the float64 reference sets the tolerance scale of judge(). Plain causal /
// no-mask attention only (what the learning kernels support). Multithreaded over (batch, head).
inline void lowp_forward_baseline(const testing::Problem& pb, testing::HostTensor* out, std::vector<float>* lse) {
  const testing::ProblemSpec& s = pb.spec;
  *out = pb.out;
  lse->assign(pb.lse.size(), 0.0f);
  const float scale = s.softmax_scale > 0 ? s.softmax_scale : 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const int64_t group = s.heads_q / s.heads_kv;
  const int64_t shift = s.causal_align == CausalAlign::kBottomRight ? s.seqlen_k - s.seqlen_q : 0;
  const int64_t d = s.head_dim;
  auto work = [&](int64_t bh) {
    const int64_t b = bh / s.heads_q, h = bh % s.heads_q, hk = h / group;
    // Gather this head into float arrays once: HostTensor::get decodes one element per call.
    std::vector<float> Q(s.seqlen_q * d), K(s.seqlen_k * d), V(s.seqlen_k * d);
    for (int64_t i = 0; i < s.seqlen_q; ++i)
      for (int64_t e = 0; e < d; ++e) Q[i * d + e] = pb.q.get(b, i, h, e);
    for (int64_t j = 0; j < s.seqlen_k; ++j)
      for (int64_t e = 0; e < d; ++e) {
        K[j * d + e] = pb.k.get(b, j, hk, e);
        V[j * d + e] = pb.v.get(b, j, hk, e);
      }
    std::vector<float> sc(static_cast<size_t>(std::max<int64_t>(s.seqlen_k, 1)));
    std::vector<float> acc(static_cast<size_t>(d));
    for (int64_t i = 0; i < s.seqlen_q; ++i) {
      int64_t hi = s.seqlen_k - 1;
      if (s.causal) hi = std::min(hi, i + shift);
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j <= hi; ++j) {
        float dot = 0;
        for (int64_t e = 0; e < d; ++e) dot += Q[i * d + e] * K[j * d + e];
        sc[j] = dot * scale;
        m = std::max(m, sc[j]);
      }
      float l = 0;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = 0; j <= hi; ++j) {
        const float pj = std::exp(sc[j] - m);
        l += pj;
        const float pr = round_to(s.dtype, pj);  // P enters P.V in the element type
        for (int64_t e = 0; e < d; ++e) acc[e] += pr * V[j * d + e];
      }
      for (int64_t e = 0; e < d; ++e) out->set(b, i, h, e, hi >= 0 ? acc[e] / l : 0.0f);
      (*lse)[b * pb.lse_batch_stride + h * pb.lse_head_stride + i] =
          hi >= 0 ? m + std::log(l) : -std::numeric_limits<float>::infinity();
    }
  };
  parallel_for(s.batch * s.heads_q, work);
}

// The spacing of the element type just above 1 (bf16 2^-7, fp16 2^-10): the tolerance floors are
// fractions of it, so a case whose baseline error happens to be 0 (seqlen_k = 1) still gets one
// rounding step of slack.
inline double dtype_eps(DType d) {
  switch (d) {
    case DType::kBFloat16: return 1.0 / 128.0;
    case DType::kFloat16: return 1.0 / 1024.0;
    default: return 1.0 / 8388608.0;
  }
}

struct Verdict {
  bool pass = false;
  std::string line;  // "out: rel_l2 2.1e-3 (limit 6.0e-3) max_abs ... "
};

// The acceptance rule for every learning kernel and every output tensor:
//   nonfinite == 0, rel_l2 <= 2 * baseline.rel_l2 + floor_rel, max_abs <= 2 * baseline.max_abs + floor_abs.
// `baseline` is the error of a same-precision implementation against the same float64 reference.
inline Verdict judge(const char* what, const testing::ErrorStats& got, const testing::ErrorStats& baseline,
                     double floor_rel, double floor_abs) {
  const double lim_rel = 2.0 * baseline.rel_l2 + floor_rel;
  const double lim_abs = 2.0 * baseline.max_abs + floor_abs;
  Verdict v;
  // Written so that NaN in any statistic fails (comparisons with NaN are false).
  v.pass = got.nonfinite == 0 && got.rel_l2 <= lim_rel && got.max_abs <= lim_abs;
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%s rel_l2 %.2e (<= %.2e) max_abs %.2e (<= %.2e) nonfinite %lld", what,
                got.rel_l2, lim_rel, got.max_abs, lim_abs, static_cast<long long>(got.nonfinite));
  v.line = buf;
  return v;
}

// A forward test case: the problem, its float64 reference and its baseline error, computed once
// and shared by every version that is checked on it.
struct ForwardCase {
  testing::ProblemSpec spec;
  testing::Problem pb;
  testing::HostTensor ref_out;
  std::vector<float> ref_lse;
  testing::ErrorStats base_out, base_lse;
  DeviceProblem dev;
  std::string error;  // non-empty: the case could not be prepared

  explicit ForwardCase(const testing::ProblemSpec& s) : spec(s), pb(s) {
    const Status st = reference_forward(pb);
    if (!st.ok()) {
      error = "reference: " + st.to_string();
      return;
    }
    ref_out = pb.out;
    ref_lse = pb.lse;
    testing::HostTensor lo;
    std::vector<float> lo_lse;
    lowp_forward_baseline(pb, &lo, &lo_lse);
    base_out = testing::compare(lo, ref_out);
    base_lse = testing::compare_lse(lo_lse, ref_lse);
    if (!dev.upload(pb)) error = "upload failed";
  }

  // Runs `version` on poisoned outputs and judges out and LSE. Unsupported shapes are reported as
  // skipped (pass = true, *skipped = true), never silently.
  Verdict check(int version, bool* skipped) {
    *skipped = false;
    Verdict v;
    if (!error.empty()) {
      v.line = error;
      return v;
    }
    if (!dev.poison_forward()) {
      v.line = "poison failed";
      return v;
    }
    const FwdParams p = dev.fwd_params(pb, version);
    const Status sup = detail::learn_supports(version, p, false);
    if (!sup.ok()) {
      *skipped = true;
      v.pass = true;
      v.line = "skipped: " + sup.to_string();
      return v;
    }
    const Status st = detail::learn_forward(version, p);
    if (!st.ok()) {
      v.line = "run: " + st.to_string();
      return v;
    }
    if (!LEARN_CHECK(cudaDeviceSynchronize()) || !dev.download_forward(pb)) {
      v.line = "device error after the run";
      return v;
    }
    const double eps = dtype_eps(spec.dtype);
    const Verdict vo = judge("out", testing::compare(pb.out, ref_out), base_out, eps / 4, 2.0 * eps);
    // LSE is fp32 arithmetic on both sides (the baseline error is ~1e-7): the floors cover
    // summation order and exp2 approximations over thousands of keys.
    const Verdict vl = judge("lse", testing::compare_lse(pb.lse, ref_lse), base_lse, 1e-4, 1e-3);
    v.pass = vo.pass && vl.pass;
    v.line = vo.line + " | " + vl.line;
    return v;
  }
};

// =============================================================================================
// 6. Shapes
// =============================================================================================

// The awkward-shape sweep every version must pass (forward and backward programs share it).
// seqlens 1, 17, 113, 1023, 4224; seqlen_q != seqlen_k both ways (with bottom-right causal, rows
// that see no key); causal and not; hdim 64 / 128; bf16 / fp16; GQA; padded (non-contiguous)
// rows. `small` keeps seqlens <= 113 (for compute-sanitizer, which runs kernels ~100x slower).
inline std::vector<testing::ProblemSpec> validation_specs(bool small) {
  std::vector<testing::ProblemSpec> out;
  struct Shape {
    int64_t sq, sk, batch, hq, hkv, pad;
  };
  const std::vector<Shape> small_shapes = {
      {1, 1, 2, 2, 2, 0}, {17, 17, 2, 4, 2, 0}, {113, 113, 1, 3, 3, 8}, {1, 113, 2, 2, 1, 0},
      {113, 17, 1, 2, 2, 0}, {17, 113, 1, 2, 2, 8},
  };
  const std::vector<Shape> large_shapes = {
      {1023, 1023, 1, 2, 2, 0}, {1023, 113, 1, 2, 1, 0}, {113, 1023, 2, 2, 2, 8},
  };
  for (int64_t hd : {64, 128})
    for (DType dt : {DType::kBFloat16, DType::kFloat16})
      for (bool causal : {false, true}) {
        std::vector<Shape> shapes = small_shapes;
        if (!small) shapes.insert(shapes.end(), large_shapes.begin(), large_shapes.end());
        for (const Shape& sh : shapes) {
          testing::ProblemSpec s;
          s.batch = sh.batch;
          s.seqlen_q = sh.sq;
          s.seqlen_k = sh.sk;
          s.heads_q = sh.hq;
          s.heads_kv = sh.hkv;
          s.head_dim = hd;
          s.dtype = dt;
          s.causal = causal;
          s.row_pad = sh.pad;
          out.push_back(s);
        }
      }
  if (!small) {
    // 4224 = 33 * 128: a multiple of the big tiles plus ragged partners; the CPU reference costs
    // seconds here, so only a few combinations.
    const struct { int64_t sq, sk; int64_t hd; DType dt; bool causal; } big[] = {
        {4224, 4224, 128, DType::kBFloat16, false},
        {4224, 4224, 128, DType::kBFloat16, true},
        {1023, 4224, 64, DType::kFloat16, true},
        {4224, 1023, 64, DType::kBFloat16, true},
    };
    for (const auto& g : big) {
      testing::ProblemSpec s;
      s.batch = 1;
      s.seqlen_q = g.sq;
      s.seqlen_k = g.sk;
      s.heads_q = 1;
      s.heads_kv = 1;
      s.head_dim = g.hd;
      s.dtype = g.dt;
      s.causal = g.causal;
      out.push_back(s);
    }
  }
  return out;
}

// The standard timing shape: bf16, hdim 128, 16 heads, batch * seqlen = `tokens` (16k).
inline testing::ProblemSpec timing_spec(int64_t seqlen, bool causal, int64_t head_dim = 128,
                                        DType dtype = DType::kBFloat16, int64_t heads = 16,
                                        int64_t tokens = 16384) {
  testing::ProblemSpec s;
  s.batch = std::max<int64_t>(1, tokens / seqlen);
  s.seqlen_q = seqlen;
  s.seqlen_k = seqlen;
  s.heads_q = heads;
  s.heads_kv = heads;
  s.head_dim = head_dim;
  s.dtype = dtype;
  s.causal = causal;
  return s;
}

// =============================================================================================
// 7. Timing: CUDA events around each rep, L2 flushed before each rep (outside the events),
//    warm-up first, median reported.
// =============================================================================================
class L2Flusher {
 public:
  bool init() {
    int dev = 0, l2 = 0;
    if (!LEARN_CHECK(cudaGetDevice(&dev)) ||
        !LEARN_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev)))
      return false;
    return buf_.allocate(static_cast<size_t>(std::max(l2, 1 << 20)) * 2);  // twice the L2
  }
  bool flush(cudaStream_t s) { return LEARN_CHECK(cudaMemsetAsync(buf_.get(), 0, buf_.bytes(), s)); }

 private:
  DeviceBuffer buf_;
};

struct Timing {
  bool ok = false;
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int reps = 0;
  std::string error;
};

// Times `fn` (a callable returning Status that enqueues work on `s`). The number of reps adapts
// so that slow versions do not eat the device budget: at least `min_reps`, at most `max_reps`,
// about `budget_ms` of timed work.
template <typename F>
Timing time_ms(F&& fn, cudaStream_t s = nullptr, int warmup = 2, int min_reps = 3, int max_reps = 50,
               double budget_ms = 1500.0, bool flush_l2 = true) {
  Timing t;
  L2Flusher flusher;
  if (flush_l2 && !flusher.init()) {
    t.error = "L2 flush buffer";
    return t;
  }
  for (int i = 0; i < warmup; ++i) {
    const Status st = fn();
    if (!st.ok()) {
      t.error = st.to_string();
      return t;
    }
  }
  if (!LEARN_CHECK(cudaStreamSynchronize(s))) {
    t.error = "sync after warm-up";
    return t;
  }
  cudaEvent_t start, stop;
  if (!LEARN_CHECK(cudaEventCreate(&start)) || !LEARN_CHECK(cudaEventCreate(&stop))) {
    t.error = "events";
    return t;
  }
  std::vector<float> times;
  int reps = max_reps;
  for (int r = 0; r < reps; ++r) {
    if (flush_l2 && !flusher.flush(s)) break;
    cudaEventRecord(start, s);
    const Status st = fn();
    cudaEventRecord(stop, s);
    if (!st.ok()) {
      t.error = st.to_string();
      break;
    }
    if (!LEARN_CHECK(cudaEventSynchronize(stop))) {
      t.error = "event sync";
      break;
    }
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    times.push_back(ms);
    if (r == 0) reps = std::max(min_reps, std::min(max_reps, static_cast<int>(budget_ms / std::max(ms, 1e-3f))));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!t.error.empty() || times.empty()) return t;
  std::sort(times.begin(), times.end());
  t.ok = true;
  t.reps = static_cast<int>(times.size());
  t.median_ms = times[times.size() / 2];
  t.min_ms = times.front();
  t.max_ms = times.back();
  return t;
}

inline double tflops(double flops, double ms) { return ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0; }

// =============================================================================================
// 8. Peak and memory
// =============================================================================================

// Measured bf16 tensor-core peak: cublasGemmEx, bf16 in/out, fp32 accumulate, 8192^3, on random
// data (zeros run faster), median of 10 after 3 warm-ups. Returns TFLOP/s, or 0 on failure.
inline double measure_bf16_peak_tflops(int n = 8192) {
  DeviceBuffer a, b, c;
  const int64_t elems = static_cast<int64_t>(n) * n;
  if (!a.allocate(elems * 2) || !b.allocate(elems * 2) || !c.allocate(elems * 2)) return 0;
  if (!fill_random_device(a.get(), DType::kBFloat16, elems, 7) ||
      !fill_random_device(b.get(), DType::kBFloat16, elems, 8))
    return 0;
  cublasHandle_t h;
  if (!LEARN_CHECK_CUBLAS(cublasCreate(&h))) return 0;
  const float alpha = 1.0f, beta = 0.0f;
  auto gemm = [&]() -> Status {
    const cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a.get(), CUDA_R_16BF, n,
                                           b.get(), CUDA_R_16BF, n, &beta, c.get(), CUDA_R_16BF, n,
                                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return cublas_status(st, "cublasGemmEx", __FILE__, __LINE__);
  };
  const Timing t = time_ms(gemm, nullptr, 3, 10, 10, 0.0, /*flush_l2=*/false);
  cublasDestroy(h);
  return t.ok ? tflops(2.0 * n * double(n) * n, t.median_ms) : 0.0;
}

// Extra device memory of one call: the learning kernels take their scratch with cudaMallocAsync
// (the device's default memory pool), so the pool's high-water mark over the call is exactly the
// memory they add beyond inputs and outputs.
class PoolPeak {
 public:
  bool begin() {
    int dev = 0;
    if (!LEARN_CHECK(cudaGetDevice(&dev)) || !LEARN_CHECK(cudaDeviceGetDefaultMemPool(&pool_, dev))) return false;
    uint64_t zero = 0;  // the attribute is a cuuint64_t (64-bit unsigned)
    return LEARN_CHECK(cudaDeviceSynchronize()) &&
           LEARN_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &zero));
  }
  int64_t end() {  // bytes, or -1 on error
    uint64_t high = 0;
    if (!LEARN_CHECK(cudaDeviceSynchronize()) ||
        !LEARN_CHECK(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &high)))
      return -1;
    return static_cast<int64_t>(high);
  }

 private:
  cudaMemPool_t pool_ = nullptr;
};

// Keeps memory freed with cudaFreeAsync in the default pool instead of returning it to the driver
// at every synchronization (the pool's default). Versions that take scratch per call (v0's S and
// P) then pay for a pool hit, not for a fresh device allocation, as they would under a caching
// allocator such as PyTorch's.
inline bool keep_pool_memory() {
  int dev = 0;
  cudaMemPool_t pool;
  uint64_t keep = ~uint64_t(0);
  return LEARN_CHECK(cudaGetDevice(&dev)) && LEARN_CHECK(cudaDeviceGetDefaultMemPool(&pool, dev)) &&
         LEARN_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
}

// =============================================================================================
// 9. Printing and arguments
// =============================================================================================
inline std::string fmt_bytes(int64_t b) {
  char buf[32];
  if (b < 0) return "?";
  if (b < (1 << 10)) std::snprintf(buf, sizeof(buf), "%lld B", static_cast<long long>(b));
  else if (b < (1 << 20)) std::snprintf(buf, sizeof(buf), "%.1f KiB", b / 1024.0);
  else if (b < (int64_t(1) << 30)) std::snprintf(buf, sizeof(buf), "%.1f MiB", b / 1048576.0);
  else std::snprintf(buf, sizeof(buf), "%.2f GiB", b / 1073741824.0);
  return buf;
}

inline std::string device_name() {
  int dev = 0;
  cudaDeviceProp prop;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) return "?";
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
         std::to_string(prop.multiProcessorCount) + " SMs)";
}

// "--name value" flags after the positional arguments.
struct Args {
  int argc;
  char** argv;
  const char* get(const char* name) const {
    for (int i = 1; i + 1 < argc; ++i)
      if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
    return nullptr;
  }
  bool has(const char* name) const {
    for (int i = 1; i < argc; ++i)
      if (std::strcmp(argv[i], name) == 0) return true;
    return false;
  }
  int64_t get_int(const char* name, int64_t dflt) const {
    const char* v = get(name);
    return v ? std::strtoll(v, nullptr, 10) : dflt;
  }
  double get_double(const char* name, double dflt) const {
    const char* v = get(name);
    return v ? std::strtod(v, nullptr) : dflt;
  }
  // "2048,4096" -> {2048, 4096}
  std::vector<int64_t> get_list(const char* name, std::vector<int64_t> dflt) const {
    const char* v = get(name);
    if (!v) return dflt;
    std::vector<int64_t> out;
    for (const char* p = v; *p;) {
      char* end = nullptr;
      const long long x = std::strtoll(p, &end, 10);
      if (end == p) break;
      out.push_back(x);
      p = (*end == ',') ? end + 1 : end;
    }
    return out;
  }
};

}  // namespace learn
}  // namespace flashlab
