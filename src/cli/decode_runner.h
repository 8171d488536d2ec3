// src/cli/decode_runner.h — decode mode (`flashlab bench --decode`) on a device: the runner mirrors
// the host decode buffers in device memory, runs attention_with_kvcache there and copies out and
// lse back, so the checks read the host buffers (the training bench's CUDA runner does the same,
// cuda_runner.cu).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "cli/runner.h"
#include "flashlab/flashlab.h"

namespace flashlab {
namespace cli {

// One decode problem in host memory: `params` points into it (device kCPU); the sizes are the
// whole allocations behind q, out, k_cache and v_cache (bytes) and the element counts of lse,
// cache_seqlens and block_table (0 when absent).
struct DecodeHostView {
  KvCacheParams params;
  size_t q_bytes = 0, out_bytes = 0, k_bytes = 0, v_bytes = 0;
  size_t lse_count = 0, seqlens_count = 0, table_count = 0;
};

class DecodeRunner {
 public:
  virtual ~DecodeRunner() = default;
  // Poisons out and lse on the device, runs once, copies them back into the host view's buffers.
  virtual Status run_once() = 0;
  // Times repeated calls (CUDA events on the runner's stream, L2 flushed before each timed call).
  virtual Status time(const TimingPlan& plan, const IterationCallback& cb, std::vector<double>* ms) = 0;
};

#if defined(FLASHLAB_WITH_CUDA)
// The CUDA runner (decode_cuda.cu): kDeviceError / kOutOfMemory when the device buffers cannot be
// set up; the KV-cache path's own errors (kvcache_workspace_size) as they come.
Status make_cuda_decode_runner(const DecodeHostView& host, Impl impl, std::unique_ptr<DecodeRunner>* out);
#endif

}  // namespace cli
}  // namespace flashlab
