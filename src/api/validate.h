// src/api/validate.h — the generic argument rules every implementation shares, and helpers that
// backends use for their own limits. Every message names the argument and the rule broken.
#pragma once

#include <cstdint>
#include <string>

#include "flashlab/flashlab.h"

namespace flashlab {
namespace detail {

// Generic rules (no implementation-specific limits). Reads host cu_seqlens only when
// config.device == kCPU. Never touches outputs.
Status validate_config(const AttentionConfig& c);
Status validate_forward_generic(const FwdParams& p);
Status validate_backward_generic(const BwdParams& p);

// Pointer alignment a backend needs (bytes), for every tensor and its outer strides.
Status check_alignment_fwd(const FwdParams& p, int64_t bytes, const char* impl_name);
Status check_alignment_bwd(const BwdParams& p, int64_t bytes, const char* impl_name);

// "head_dim (264) is not supported by impl learn_v4: supported 64, 128"
Status unsupported_value(const char* what, int64_t value, const char* impl_name, const std::string& supported);

}  // namespace detail
}  // namespace flashlab
