// src/testing/device_problem.h — a host Problem (problem.h) mirrored in CUDA device memory: what the
// GPU tests (tests/gpu) and the CLI's CUDA runner (src/cli/cuda_runner.cu) share.
//
//   DeviceBuffer   one cudaMalloc'd allocation, freed by its destructor: upload, download, poison
//                  (0xFF bytes, a NaN in fp32, fp16 and bf16 alike).
//   DeviceProblem  every tensor of a Problem on the device with the host's strides (row padding
//                  included) and the host's LSE layout, so outputs download straight back into the
//                  Problem; fwd_params() / bwd_params() point any implementation's params at it.
//
// Errors come back as Status naming the buffer (kOutOfMemory for a failed allocation, else
// kDeviceError). Plain C++ against the CUDA runtime: library flashlab_testing_cuda, built when CUDA
// is on. learn/harness.cuh keeps its own buffers (its comment says why).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "flashlab/flashlab.h"
#include "testing/problem.h"

namespace flashlab {
namespace testing {

// Ok for cudaSuccess, else kOutOfMemory (cudaErrorMemoryAllocation) or kDeviceError with
// "what: cudaErrorName (description)".
Status cuda_status(cudaError_t e, const std::string& what);

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Frees what the buffer held, then allocates `bytes`. Zero bytes allocate nothing: the pointer
  // stays null and every operation below succeeds without touching the device. `name` labels
  // error messages.
  Status allocate(size_t bytes, const std::string& name = "buffer");
  void reset();  // frees the allocation (the buffer is then empty)

  Status upload(const void* host);    // bytes() bytes from host memory
  Status download(void* host) const;  // bytes() bytes to host memory
  Status poison();                    // every byte 0xFF (cudaMemset, the default stream)

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }
  const std::string& name() const { return name_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  std::string name_;
};

// The problem's tensors on the device. init() uploads the inputs (q, k, v, dout, cu_seqlens, ALiBi
// slopes) and the forward outputs the host holds (out, lse: what a backward reads), and allocates
// dq, dk, dv. The host Problem must outlive the DeviceProblem; downloads write into it.
class DeviceProblem {
 public:
  Status init(Problem* pb);
  Problem& host() const { return *pb_; }

  // The host problem's params for `impl` (Problem::fwd_params / bwd_params: shapes, strides,
  // flags), with device = kCUDA, `stream`, and every tensor, lse, cu_seqlens and the ALiBi slopes
  // on the device. Callers set what they vary (softmax_scale, deterministic, workspace).
  FwdParams fwd_params(Impl impl, void* stream = nullptr) const;
  BwdParams bwd_params(Impl impl, void* stream = nullptr) const;

  Status upload_forward_outputs();     // host out, lse -> device (the backward's inputs)
  Status poison_forward_outputs();     // out, lse
  Status poison_backward_outputs();    // dq, dk, dv
  Status download_forward_outputs();   // out, lse -> host
  Status download_backward_outputs();  // dq, dk, dv -> host

  DeviceBuffer q, k, v, dout, out, lse, dq, dk, dv, cu_seqlens_q, cu_seqlens_k, alibi_slopes, sink_logits, dsink;

 private:
  void point_at_device(AttentionConfig* c, void* stream) const;
  Problem* pb_ = nullptr;
};

}  // namespace testing
}  // namespace flashlab
