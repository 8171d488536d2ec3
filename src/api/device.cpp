#include "api/device.h"

#include <sstream>

#if defined(FLASHLAB_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace flashlab {
namespace detail {

#if defined(FLASHLAB_WITH_CUDA)
bool cuda_compiled() { return true; }

int cuda_device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free error so later calls start clean
      n = 0;
    }
    return n;
  }();
  return count;
}

std::vector<std::string> cuda_device_names() {
  std::vector<std::string> names;
  for (int d = 0; d < cuda_device_count(); ++d) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) continue;
    std::ostringstream os;
    os << prop.name << " (sm_" << prop.major << prop.minor << ", " << prop.multiProcessorCount << " SMs, "
       << (prop.totalGlobalMem >> 20) << " MiB)";
    names.push_back(os.str());
  }
  return names;
}

Status check_pointer_device(const void* ptr, Device device, const char* name) {
  if (ptr == nullptr || cuda_device_count() == 0) {
    if (device == Device::kCUDA && cuda_device_count() == 0)
      return Status::Unsupported("device cuda: no CUDA device is available");
    return Status::Ok();
  }
  cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    cudaGetLastError();
    return Status::Ok();  // the runtime cannot tell: accept
  }
  const bool on_device = attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
  const bool on_host = attr.type != cudaMemoryTypeDevice;  // unregistered, host (pinned), managed
  if (device == Device::kCUDA && !on_device)
    return Status::Invalid(std::string(name) + " is host memory but device is cuda");
  if (device == Device::kCPU && !on_host)
    return Status::Invalid(std::string(name) + " is CUDA device memory but device is cpu");
  return Status::Ok();
}
#else
bool cuda_compiled() { return false; }
int cuda_device_count() { return 0; }
std::vector<std::string> cuda_device_names() { return {}; }
Status check_pointer_device(const void*, Device device, const char*) {
  if (device == Device::kCUDA) return Status::Unsupported("device cuda: this build of flashlab has no CUDA support");
  return Status::Ok();
}
#endif

}  // namespace detail
}  // namespace flashlab
