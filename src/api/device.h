// src/api/device.h — what the build and the machine offer, and which device a pointer lives on.
#pragma once

#include <string>
#include <vector>

#include "flashlab/flashlab.h"

namespace flashlab {
namespace detail {

bool cuda_compiled();
int cuda_device_count();  // 0 without CUDA or without a GPU (cached after the first call)
std::vector<std::string> cuda_device_names();

// Errors when `ptr` provably lives on another device than `device` (CUDA builds ask the runtime;
// a CPU-only build cannot tell and accepts). `name` is used in the message.
Status check_pointer_device(const void* ptr, Device device, const char* name);

}  // namespace detail
}  // namespace flashlab
