// src/cuda/common/supports.h — the supports() rules every CUDA implementation shares (host only):
// device and dtype, then the head dim, whether its (dtype, bucket) instantiation was compiled, and
// the size caps. Each api_<arch>.cpp adds its own rules (features it refuses, the compute
// capability). Messages name the implementation and the rule.
#pragma once

#include <cstdint>
#include <string>

#include "api/validate.h"
#include "cuda/common/kernel_args.h"
#include "flashlab/flashlab.h"
#include "flashlab_build_config.h"

namespace flashlab {
namespace common {

constexpr int64_t kMaxSeqlen = int64_t(1) << 30;  // positions are int in the kernels (i + shift - j must fit)

inline Status check_device_and_dtype(const AttentionConfig& c, const char* impl) {
  if (c.device != Device::kCUDA)
    return Status::Unsupported(std::string("impl ") + impl + " runs on cuda, but device is " + to_string(c.device));
  if (c.dtype != DType::kBFloat16 && c.dtype != DType::kFloat16)
    return Status::Unsupported(std::string("dtype ") + to_string(c.dtype) + " is not supported by impl " + impl +
                               ": supported bf16, fp16");
  return Status::Ok();
}

// `built(bucket)`: whether this build compiled the instantiation for (c.dtype, bucket).
// `pass`: "" for the forward, "backward: " for the backward (the not-compiled message's prefix).
template <typename Built>
Status check_head_dim_and_sizes(const AttentionConfig& c, const char* impl, const char* pass, Built built) {
  if (c.head_dim > 256 || c.head_dim % 8 != 0)
    return detail::unsupported_value("head_dim", c.head_dim, impl,
                                     "multiples of 8 up to 256 (run in the buckets 32, 64, 96, 128, 192, 256)");
  const int bucket = head_dim_bucket(static_cast<int>(c.head_dim));
  if (!built(bucket))
    return Status::Unsupported(std::string(pass) + "head_dim " + std::to_string(c.head_dim) + " (bucket " +
                               std::to_string(bucket) + ") with dtype " + to_string(c.dtype) +
                               " is not compiled into this build of impl " + impl + " (built: head dims " +
                               FLASHLAB_BUILD_HEAD_DIMS + ", dtypes " + FLASHLAB_BUILD_DTYPES +
                               "): reconfigure with -DFLASHLAB_HEAD_DIMS=... -DFLASHLAB_DTYPES=...");
  if (c.seqlen_q > kMaxSeqlen) return detail::unsupported_value("seqlen_q", c.seqlen_q, impl, "<= 2^30");
  if (c.seqlen_k > kMaxSeqlen) return detail::unsupported_value("seqlen_k", c.seqlen_k, impl, "<= 2^30");
  if (c.heads_q > kMaxGridYZ) return detail::unsupported_value("heads_q", c.heads_q, impl, "<= 65535 (grid y)");
  if (c.batch > kMaxGridYZ) return detail::unsupported_value("batch", c.batch, impl, "<= 65535 (grid z)");
  return Status::Ok();
}

}  // namespace common
}  // namespace flashlab
