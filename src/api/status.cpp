#include "flashlab/status.h"

#include "flashlab/dtype.h"

namespace flashlab {

const char* to_string(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kOutOfMemory: return "out_of_memory";
    case StatusCode::kDeviceError: return "device_error";
    case StatusCode::kInternal: return "internal";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return std::string(flashlab::to_string(code_)) + ": " + message_;
}

const char* to_string(DType d) {
  switch (d) {
    case DType::kFloat32: return "fp32";
    case DType::kFloat16: return "fp16";
    case DType::kBFloat16: return "bf16";
    case DType::kFloat8E4M3: return "fp8_e4m3";
  }
  return "unknown";
}

}  // namespace flashlab
