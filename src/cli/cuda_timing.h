// src/cli/cuda_timing.h — the CLI's CUDA timing loop, shared by the training runner (cuda_runner.cu)
// and the decode runner (decode_cuda.cu). CUDA sources only.
//
// `plan.warmup` untimed calls, then per timed call: a memset of `flush` (256 MiB: evicts the inputs
// from L2, so each call starts cold as it would inside a model), CUDA events around the call on
// `stream`, the elapsed milliseconds appended to *ms; stops early once `plan.budget_s` of timed work
// is spent (at least one call).
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "cli/runner.h"
#include "testing/device_problem.h"

namespace flashlab {
namespace cli {

constexpr size_t kL2FlushBytes = size_t(256) << 20;

template <typename Call>
Status time_cuda_calls(Call call, cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop,
                       const testing::DeviceBuffer& flush, const TimingPlan& plan, const IterationCallback& cb,
                       std::vector<double>* ms) {
  using testing::cuda_status;
  ms->clear();
  for (int i = 0; i < plan.warmup; ++i) FLASHLAB_RETURN_IF_ERROR(call());
  FLASHLAB_RETURN_IF_ERROR(cuda_status(cudaStreamSynchronize(stream), "warm-up"));
  double spent = 0;
  for (int i = 0; i < plan.iters; ++i) {
    FLASHLAB_RETURN_IF_ERROR(
        cuda_status(cudaMemsetAsync(flush.get(), i & 0xff, flush.bytes(), stream), "L2 flush"));
    FLASHLAB_RETURN_IF_ERROR(cuda_status(cudaEventRecord(start, stream), "cudaEventRecord"));
    FLASHLAB_RETURN_IF_ERROR(call());
    FLASHLAB_RETURN_IF_ERROR(cuda_status(cudaEventRecord(stop, stream), "cudaEventRecord"));
    FLASHLAB_RETURN_IF_ERROR(cuda_status(cudaEventSynchronize(stop), "the kernel"));
    float t = 0;
    FLASHLAB_RETURN_IF_ERROR(cuda_status(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime"));
    ms->push_back(t);
    spent += t;
    if (cb) cb(i + 1, plan.iters);
    if (plan.budget_s > 0 && spent > plan.budget_s * 1e3) break;
  }
  return cuda_status(cudaGetLastError(), "the kernel");
}

// What a CLI runner times with, owned: its stream, the two events and the L2 flush buffer.
struct CudaTiming {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  testing::DeviceBuffer flush;

  CudaTiming() = default;
  CudaTiming(const CudaTiming&) = delete;
  CudaTiming& operator=(const CudaTiming&) = delete;
  ~CudaTiming() {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (stream) cudaStreamDestroy(stream);
  }
  Status init() {
    using testing::cuda_status;
    FLASHLAB_RETURN_IF_ERROR(cuda_status(cudaStreamCreate(&stream), "cudaStreamCreate"));
    FLASHLAB_RETURN_IF_ERROR(cuda_status(cudaEventCreate(&start), "cudaEventCreate"));
    FLASHLAB_RETURN_IF_ERROR(cuda_status(cudaEventCreate(&stop), "cudaEventCreate"));
    return flush.allocate(kL2FlushBytes, "l2_flush");
  }
  // time_cuda_calls on this stream, events and flush buffer.
  template <typename Call>
  Status time(Call call, const TimingPlan& plan, const IterationCallback& cb, std::vector<double>* ms) const {
    return time_cuda_calls(call, stream, start, stop, flush, plan, cb, ms);
  }
};

}  // namespace cli
}  // namespace flashlab
