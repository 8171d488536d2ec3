// src/cuda/common/launch.h — the host side of every launch, for every CUDA implementation:
// CUDA errors as Status, the CUTLASS element type of a DType, the current device's facts cached
// once per device, and the shared-memory opt-in done once per kernel and device.
//
// Why cached: device attributes never change in a process, and cudaDeviceGetAttribute plus
// cudaFuncSetAttribute on every call were a visible part of the eager host time per call (the
// issue's measurement: 162 µs per flashlab.torch call vs SDPA's 46 µs on an H100). What stays per
// call is cudaGetDevice (a thread-local read in the runtime) and the launch itself.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include <cutlass/numeric_types.h>

#include "flashlab/dtype.h"
#include "flashlab/status.h"

namespace flashlab {
namespace common {

template <DType kDType>
struct ElementOf;
template <>
struct ElementOf<DType::kBFloat16> {
  using type = cutlass::bfloat16_t;
};
template <>
struct ElementOf<DType::kFloat16> {
  using type = cutlass::half_t;
};

// kDeviceError naming the implementation and the call that failed; Ok for cudaSuccess (no string
// is built then: this runs on every launch).
Status cuda_error(cudaError_t e, const char* impl, const char* what);

struct DeviceFacts {
  int major = 0, minor = 0;  // compute capability
  int smem_optin = 0;        // bytes of dynamic shared memory a block may opt into
  int sm_count = 0;
};

// The current device and its facts (queried on its first use in this process).
Status current_device(int* device, const DeviceFacts** facts);

// Makes `kKernel` launchable with `smem` bytes of dynamic shared memory on the current device:
// kUnsupported when the device cannot give that many, the cudaFuncSetAttribute opt-in above the
// default 48 KiB the first time per device (devices 0..63; beyond, every call). `what` names the
// kernel in the error with the head-dim bucket ("forward", 128: "forward for head-dim bucket 128");
// no string is built unless there is an error.
template <auto kKernel>
Status prepare_kernel(int smem, const char* impl, const char* what, int head_dim) {
  int device = 0;
  const DeviceFacts* facts = nullptr;
  FLASHLAB_RETURN_IF_ERROR(current_device(&device, &facts));
  if (smem > facts->smem_optin)
    return Status::Unsupported(std::string("impl ") + impl + ": " + what + " for head-dim bucket " +
                               std::to_string(head_dim) + " needs " + std::to_string(smem) +
                               " bytes of shared memory per block; this GPU allows " +
                               std::to_string(facts->smem_optin));
  if (smem <= 48 * 1024) return Status::Ok();
  static std::atomic<uint64_t> opted_in{0};  // one bit per device
  const uint64_t bit = device < 64 ? uint64_t(1) << device : 0;
  if (bit != 0 && (opted_in.load(std::memory_order_acquire) & bit)) return Status::Ok();
  FLASHLAB_RETURN_IF_ERROR(
      cuda_error(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), impl,
                 "cudaFuncSetAttribute"));
  opted_in.fetch_or(bit, std::memory_order_release);
  return Status::Ok();
}

// Launches kernel<<<grid, block, smem, stream>>>(args...), with programmatic dependent launch when
// `pdl` and the device is sm_90 or later: the kernel's CTAs may start while the stream's previous
// kernel still runs (once every CTA of that kernel has run griddepcontrol.launch_dependents or
// exited), so its launch and prologue overlap that kernel's tail. The kernel must run
// griddepcontrol.wait (ptx::grid_dependency_wait) before it reads what the previous kernel writes
// or writes anything; the wait returns once that kernel has completed and its writes are visible.
// Without the attribute (pdl false, or an older GPU) this is an ordinary launch and the wait a no-op.
template <typename... KArgs, typename... Args>
cudaError_t launch_kernel(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          bool pdl, Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

inline bool nonempty(dim3 g) {
  return g.x > 0 && g.y > 0 && g.z > 0;
}

}  // namespace common
}  // namespace flashlab
