// src/cuda/common/launch.cpp — see launch.h.
#include "cuda/common/launch.h"

#include <mutex>

namespace flashlab {
namespace common {

Status cuda_error(cudaError_t e, const char* impl, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Status(StatusCode::kDeviceError, std::string("impl ") + impl + ": " + what + ": " +
                                              cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

namespace {

Status query(int device, DeviceFacts* f) {
  const char* impl = "cuda";
  FLASHLAB_RETURN_IF_ERROR(
      cuda_error(cudaDeviceGetAttribute(&f->major, cudaDevAttrComputeCapabilityMajor, device), impl,
                 "cudaDeviceGetAttribute"));
  FLASHLAB_RETURN_IF_ERROR(
      cuda_error(cudaDeviceGetAttribute(&f->minor, cudaDevAttrComputeCapabilityMinor, device), impl,
                 "cudaDeviceGetAttribute"));
  FLASHLAB_RETURN_IF_ERROR(
      cuda_error(cudaDeviceGetAttribute(&f->smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                 impl, "cudaDeviceGetAttribute"));
  return cuda_error(cudaDeviceGetAttribute(&f->sm_count, cudaDevAttrMultiProcessorCount, device), impl,
                    "cudaDeviceGetAttribute");
}

constexpr int kCachedDevices = 64;

}  // namespace

Status current_device(int* device, const DeviceFacts** facts) {
  FLASHLAB_RETURN_IF_ERROR(cuda_error(cudaGetDevice(device), "cuda", "cudaGetDevice"));
  if (*device < 0 || *device >= kCachedDevices) {  // not cached: query every time
    thread_local DeviceFacts uncached;
    FLASHLAB_RETURN_IF_ERROR(query(*device, &uncached));
    *facts = &uncached;
    return Status::Ok();
  }
  static std::mutex mutex;
  static DeviceFacts cache[kCachedDevices];
  static std::atomic<bool> known[kCachedDevices];
  if (!known[*device].load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!known[*device].load(std::memory_order_relaxed)) {
      FLASHLAB_RETURN_IF_ERROR(query(*device, &cache[*device]));  // an error is not cached
      known[*device].store(true, std::memory_order_release);
    }
  }
  *facts = &cache[*device];
  return Status::Ok();
}

}  // namespace common
}  // namespace flashlab
