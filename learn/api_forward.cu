// learn/api_forward.cu — the learning kernels behind the C++ API: learn_supports() (what versions
// 0..4 can run, forward and backward) and learn_forward() (one dispatcher over the versions).
//
// The dispatcher (src/api/dispatch.cpp) has validated the generic rules and resolved
// softmax_scale before calling here. The learning kernels implement plain attention only; every
// other feature is refused by name, so a caller learns what to change.
#include <algorithm>
#include <cmath>
#include <string>

#include "api/backend.h"
#include "api/validate.h"
#include "kernels/common.cuh"
#include "kernels/forward.h"

namespace flashlab {
namespace detail {

namespace {
std::string impl_name(int version) { return "learn_v" + std::to_string(version); }

Status refuse(int version, const std::string& feature) {
  return Status::Unsupported(feature + " is not supported by impl " + impl_name(version) +
                             " (the learning kernels implement plain, causal (bottom-right) and GQA attention)");
}
}  // namespace

Status learn_supports(int version, const AttentionConfig& c, bool backward) {
  (void)backward;  // forward and backward kernels share these limits
  if (version < 0 || version > 4)
    return Status::Unsupported("learning version " + std::to_string(version) + " does not exist: versions are 0..4");
  const std::string name = impl_name(version);
  if (c.device != Device::kCUDA) return Status::Unsupported("impl " + name + " runs on cuda only");
  if (c.dtype != DType::kBFloat16 && c.dtype != DType::kFloat16)
    return Status::Unsupported(std::string("dtype ") + to_string(c.dtype) + " is not supported by impl " + name +
                               ": supported bf16, fp16");
  if (c.head_dim != 64 && c.head_dim != 128) return unsupported_value("head_dim", c.head_dim, name.c_str(), "64, 128");
  if (c.dropout_p > 0.0f) return refuse(version, "dropout");
  if (c.softcap > 0.0f) return refuse(version, "softcap");
  if (c.alibi_slopes != nullptr) return refuse(version, "alibi");
  if (c.sink_logits != nullptr) return refuse(version, "sink_logits (attention sinks)");
  if (c.window_left >= 0 || (!c.causal && c.window_right >= 0)) return refuse(version, "sliding window");
  if (c.cu_seqlens_q != nullptr || c.cu_seqlens_k != nullptr) return refuse(version, "varlen (cu_seqlens)");
  if (c.causal && c.causal_align == CausalAlign::kTopLeft && c.seqlen_q != c.seqlen_k)
    return refuse(version, "top-left causal alignment with seqlen_q != seqlen_k");
  // Sizes go to int kernel arguments and grid dimensions (y, z <= 65535).
  if (c.seqlen_q > (int64_t(1) << 30) || c.seqlen_k > (int64_t(1) << 30))
    return unsupported_value("seqlen", std::max(c.seqlen_q, c.seqlen_k), name.c_str(), "<= 2^30");
  if (c.heads_q > 65535) return unsupported_value("heads_q", c.heads_q, name.c_str(), "<= 65535");
  if (c.batch > 65535) return unsupported_value("batch", c.batch, name.c_str(), "<= 65535");
  // The fused kernels fold the scale into exp2 and take the row max of the unscaled scores.
  if (!(c.softmax_scale > 0.0f) && !std::isnan(c.softmax_scale))
    return Status::Unsupported("softmax_scale (" + std::to_string(c.softmax_scale) + ") is not supported by impl " +
                               name + ": must be > 0");
  return Status::Ok();
}

Status learn_forward(int version, const FwdParams& p) {
  // v1..v4 move 16 bytes (8 elements) per load and store: pointers and strides must allow it.
  if (version >= 1) FLASHLAB_RETURN_IF_ERROR(check_alignment_fwd(p, 16, impl_name(version).c_str()));
  if (p.batch == 0 || p.seqlen_q == 0 || p.heads_q == 0) return Status::Ok();  // nothing to write
  if (p.seqlen_k == 0) return learn::forward_no_keys(p);
  switch (version) {
    case 0: return learn::forward_v0(p);
    case 1: return learn::forward_v1(p);
    case 2: return learn::forward_v2(p);
    case 3: return learn::forward_v3(p);
    case 4: return learn::forward_v4(p);
    default: return Status::Unsupported("learning version " + std::to_string(version) + " does not exist");
  }
}

}  // namespace detail
}  // namespace flashlab
