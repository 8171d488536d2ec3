// src/api/dispatch.cpp — from a public call to one backend.
//
//   attention_forward(p)
//     -> validate_forward_generic(p)        generic rules (validate.cpp)
//     -> resolve kAuto to a concrete impl   (first available backend in kBackends that supports p;
//                                            rows marked experimental are reachable only by name)
//     -> backend.supports(p)                the implementation's own limits
//     -> fill defaults (softmax_scale)      backends always see a finite scale
//     -> backend.forward(p)                 exceptions become Status; nothing escapes
//
// One table, kBackends, holds every implementation built: its device, description, capability
// check (with the refusal message), forward / backward entry points and workspace sizes. Listing,
// kAuto and the workspace queries derive from it; names come from kImplNames (parse_impl and
// to_string read only that). A new backend is its Impl value, a kImplNames entry, one kBackends row
// and its functions in backend.h (docs/architecture.md, "Adding an implementation").
#include <cmath>
#include <new>
#include <sstream>

#include "api/backend.h"
#include "api/device.h"
#include "api/validate.h"
#include "flashlab_build_config.h"

namespace flashlab {
namespace detail {
namespace {

using SupportsFn = Status (*)(const AttentionConfig&, bool backward, const char* name);
using FwdFn = Status (*)(const FwdParams&);
using BwdFn = Status (*)(const BwdParams&);
using FwdWorkspaceFn = Status (*)(const FwdParams&, int64_t* bytes);
using BwdWorkspaceFn = Status (*)(const BwdParams&, int64_t* bytes);

// Every Impl and its name (also for implementations this build does not compile).
struct ImplName {
  Impl impl;
  const char* name;
};
constexpr ImplName kImplNames[] = {
    {Impl::kAuto, "auto"},          {Impl::kReference, "reference"}, {Impl::kCpuFlash, "cpu_flash"},
    {Impl::kLearnV0, "learn_v0"},   {Impl::kLearnV1, "learn_v1"},    {Impl::kLearnV2, "learn_v2"},
    {Impl::kLearnV3, "learn_v3"},   {Impl::kLearnV4, "learn_v4"},    {Impl::kCudaSm80, "cuda_sm80"},
    {Impl::kCudaSm90, "cuda_sm90"},
};

struct Backend {
  Impl impl;
  Device device;
  const char* description;
  SupportsFn supports;  // Ok, or kUnsupported saying which limit the call breaks
  FwdFn forward;
  BwdFn backward;
  FwdWorkspaceFn forward_workspace;   // null: needs no caller workspace
  BwdWorkspaceFn backward_workspace;  // null: needs no caller workspace
  // Not yet verified on a GPU against the reference: runs only when named, never chosen by kAuto.
  bool experimental = false;
  // Null, or a check of the forward's tensors (not just the configuration), e.g. strides that
  // cuda_sm90's TMA cannot describe: kUnsupported there makes kAuto try the next row, and is the
  // error when the implementation was named. Runs before anything is launched.
  FwdFn forward_accepts = nullptr;
  BwdFn backward_accepts = nullptr;  // the same for the backward's tensors and flags (deterministic)
  const char* name() const { return to_string(impl); }
};

Status cpu_supports(const AttentionConfig& c, bool, const char* name) {
  if (c.device != Device::kCPU)
    return Status::Unsupported(std::string("impl ") + name + " runs on the cpu, but device is " +
                               to_string(c.device));
  if (c.head_dim > kCpuMaxHeadDim)
    return unsupported_value("head_dim", c.head_dim, name, "1.." + std::to_string(kCpuMaxHeadDim));
  return Status::Ok();
}

#if defined(FLASHLAB_WITH_CUDA)
template <int V>
Status learn_supports_v(const AttentionConfig& c, bool backward, const char* name) {
  if (c.device != Device::kCUDA)
    return Status::Unsupported(std::string("impl ") + name + " runs on cuda, but device is " +
                               to_string(c.device));
  return learn_supports(V, c, backward);
}
template <int V>
Status learn_fwd_v(const FwdParams& p) {
  return learn_forward(V, p);
}
template <int V>
Status learn_bwd_v(const BwdParams& p) {
  return learn_backward(V, p);
}
#endif

#if defined(FLASHLAB_WITH_CUDA_SM80)
Status sm80_supports_named(const AttentionConfig& c, bool backward, const char*) {
  return sm80_supports(c, backward);
}
#endif

#if defined(FLASHLAB_WITH_CUDA_SM90)
Status sm90_supports_named(const AttentionConfig& c, bool backward, const char*) {
  return sm90_supports(c, backward);
}
#endif

// Order matters for kAuto: the first available row that supports the call wins, so the fastest
// implementation of each device comes first.
const Backend kBackends[] = {
#if defined(FLASHLAB_WITH_CUDA_SM90)
    // The Hopper kernels: sm_90 devices; what they refuse (dropout; varlen without total_q /
    // total_k; StreamingLLM sink tokens beside a left window in the forward above head dim 192)
    // kAuto serves with cuda_sm80, the next row.
    {Impl::kCudaSm90, Device::kCUDA,
     "Hopper kernels for sm_90 (TMA, wgmma, warp-specialized); dropout and sink tokens beside a left window "
     "in the forward at head_dim > 192: cuda_sm80",
     sm90_supports_named, sm90_forward, sm90_backward, sm90_forward_workspace_size, sm90_backward_workspace_size,
     /*experimental=*/false, sm90_forward_accepts, sm90_backward_accepts},
#endif
#if defined(FLASHLAB_WITH_CUDA_SM80)
    // The production path: verified on the H100 (GPU sweeps of 1000 forward and 1000 backward
    // configurations, compute-sanitizer clean), every feature, caller-provided workspace only.
    {Impl::kCudaSm80, Device::kCUDA, "production CuTe kernels for sm80 and later (FlashAttention-2)",
     sm80_supports_named, sm80_forward, sm80_backward, nullptr, sm80_backward_workspace_size},
#endif
#if defined(FLASHLAB_WITH_CUDA)
    // The learning kernels allocate their own backward scratch: no caller workspace.
    {Impl::kLearnV4, Device::kCUDA, "learning path v4: pipelined tensor cores (cp.async, swizzle)",
     learn_supports_v<4>, learn_fwd_v<4>, learn_bwd_v<4>, nullptr, nullptr},
    {Impl::kLearnV3, Device::kCUDA, "learning path v3: tensor cores (mma.sync, ldmatrix)",
     learn_supports_v<3>, learn_fwd_v<3>, learn_bwd_v<3>, nullptr, nullptr},
    {Impl::kLearnV2, Device::kCUDA, "learning path v2: FlashAttention-2 loop order, scalar",
     learn_supports_v<2>, learn_fwd_v<2>, learn_bwd_v<2>, nullptr, nullptr},
    {Impl::kLearnV1, Device::kCUDA, "learning path v1: FlashAttention-1, scalar", learn_supports_v<1>,
     learn_fwd_v<1>, learn_bwd_v<1>, nullptr, nullptr},
    {Impl::kLearnV0, Device::kCUDA, "learning path v0: standard attention (cuBLAS + softmax)",
     learn_supports_v<0>, learn_fwd_v<0>, learn_bwd_v<0>, nullptr, nullptr},
#endif
    {Impl::kCpuFlash, Device::kCPU, "CPU FlashAttention-2: tiled, online softmax, OpenMP", cpu_supports,
     cpu_flash_forward, cpu_flash_backward, nullptr, nullptr},
    {Impl::kReference, Device::kCPU, "CPU float64 reference: materializes S and P (the oracle)", cpu_supports,
     reference_forward, reference_backward, nullptr, nullptr},
};

bool available(const Backend& b) {
  return b.device == Device::kCPU || cuda_device_count() > 0;
}

// The backend's own rule, then the features only some backends have yet.
Status backend_supports(const Backend& b, const AttentionConfig& c, bool backward) {
  FLASHLAB_RETURN_IF_ERROR(b.supports(c, backward, b.name()));
  // docs/design/sink-tokens.md: the CPU backends and cuda_sm80 have them, cuda_sm90 in the forward
  // up to head dim 192 and in the backward, deterministic included (sm90_supports refuses its forward
  // above 192 beside a left window, and impl=auto runs cuda_sm80 there), the learning kernels not.
  const bool sink_tokens_served = b.impl == Impl::kReference || b.impl == Impl::kCpuFlash ||
                                  b.impl == Impl::kCudaSm80 || b.impl == Impl::kCudaSm90;
  if (c.sink_tokens > 0 && !sink_tokens_served)
    return Status::Unsupported(std::string("sink_tokens (StreamingLLM sink tokens) is not supported by impl ") +
                               b.name() + " yet: impl cuda_sm90, cuda_sm80 (and cpu_flash, reference on the cpu) serve it");
  return Status::Ok();
}

const Backend* find_backend(Impl impl) {
  for (const Backend& b : kBackends)
    if (b.impl == impl) return &b;
  return nullptr;
}

// Resolves the implementation and checks that it supports the call (`fwd` / `bwd`: the tensors
// too, where a row has forward_accepts / backward_accepts).
Status select(const AttentionConfig& c, bool backward, const Backend** out, const FwdParams* fwd = nullptr,
              const BwdParams* bwd = nullptr) {
  if (c.impl == Impl::kAuto) {
    // Every refusal is reported: the first alone can name a fallback that refused too (cuda_sm90
    // sends varlen above its head dims to cuda_sm80, which may lack the head dim in a build with
    // fewer buckets).
    Status first_error;
    std::string refusals;
    int refused = 0;
    for (const Backend& b : kBackends) {
      if (b.device != c.device || b.experimental || !available(b)) continue;
      Status st = backend_supports(b, c, backward);
      if (st.ok() && fwd != nullptr && b.forward_accepts != nullptr) st = b.forward_accepts(*fwd);
      if (st.ok() && bwd != nullptr && b.backward_accepts != nullptr) st = b.backward_accepts(*bwd);
      if (st.ok()) {
        *out = &b;
        return st;
      }
      if (first_error.ok()) first_error = st;
      refusals += std::string(refused++ > 0 ? "; " : "") + st.message();
    }
    if (refused == 1) return first_error;
    if (refused > 1) return Status(first_error.code(), "impl auto: no implementation serves this call: " + refusals);
    return Status::Unsupported(std::string("impl auto: no implementation available for device ") +
                               to_string(c.device));
  }
  const Backend* b = find_backend(c.impl);
  if (b == nullptr) {
    return Status::Unsupported(std::string("impl ") + to_string(c.impl) + " is not compiled into this build");
  }
  if (!available(*b))
    return Status::Unsupported(std::string("impl ") + b->name() + ": no CUDA device is available");
  FLASHLAB_RETURN_IF_ERROR(backend_supports(*b, c, backward));
  if (fwd != nullptr && b->forward_accepts != nullptr) FLASHLAB_RETURN_IF_ERROR(b->forward_accepts(*fwd));
  if (bwd != nullptr && b->backward_accepts != nullptr) FLASHLAB_RETURN_IF_ERROR(b->backward_accepts(*bwd));
  *out = b;
  return Status::Ok();
}

template <typename P>
void fill_defaults(P& p, const Backend& b) {
  if (std::isnan(p.softmax_scale)) p.softmax_scale = 1.0f / std::sqrt(static_cast<float>(p.head_dim));
  p.impl = b.impl;
}

template <typename Fn, typename P>
Status run_guarded(Fn fn, const P& p) {
  try {
    return fn(p);
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kOutOfMemory, "out of host memory for scratch buffers");
  } catch (const std::exception& e) {
    return Status(StatusCode::kInternal, std::string("unexpected exception: ") + e.what());
  } catch (...) {
    return Status(StatusCode::kInternal, "unexpected exception");
  }
}

}  // namespace
}  // namespace detail

// ---------------------------------------------------------------------------------------------
Status validate_forward(const FwdParams& p) {
  FLASHLAB_RETURN_IF_ERROR(detail::validate_forward_generic(p));
  const detail::Backend* b = nullptr;
  return detail::select(p, false, &b);
}

Status validate_backward(const BwdParams& p) {
  FLASHLAB_RETURN_IF_ERROR(detail::validate_backward_generic(p));
  const detail::Backend* b = nullptr;
  return detail::select(p, true, &b, nullptr, &p);
}

Status attention_forward(const FwdParams& params) {
  FLASHLAB_RETURN_IF_ERROR(detail::validate_forward_generic(params));
  const detail::Backend* b = nullptr;
  FLASHLAB_RETURN_IF_ERROR(detail::select(params, false, &b, &params));
  FwdParams p = params;
  detail::fill_defaults(p, *b);
  return detail::run_guarded(b->forward, p);
}

Status attention_backward(const BwdParams& params) {
  FLASHLAB_RETURN_IF_ERROR(detail::validate_backward_generic(params));
  const detail::Backend* b = nullptr;
  FLASHLAB_RETURN_IF_ERROR(detail::select(params, true, &b, nullptr, &params));
  BwdParams p = params;
  detail::fill_defaults(p, *b);
  return detail::run_guarded(b->backward, p);
}

// The selected implementation's requirement, from its row (null: none; cuda_sm80 takes all its
// backward scratch from the caller: dQ accumulators, D = rowsum(dO ∘ O), GQA dK/dV slices).
// The size is a function of the configuration, so only the configuration is validated here; the
// tensors (pointers, placement) are checked by the call that uses the workspace. Validating them
// twice cost a pointer-attribute query per tensor on every eager Python call (python/src/core.cpp
// asks for the size, then calls).
Status forward_workspace_size(const FwdParams& p, int64_t* bytes) {
  FLASHLAB_RETURN_IF_ERROR(detail::validate_config(p));
  const detail::Backend* b = nullptr;
  FLASHLAB_RETURN_IF_ERROR(detail::select(p, false, &b));
  *bytes = 0;
  return b->forward_workspace ? b->forward_workspace(p, bytes) : Status::Ok();
}

Status backward_workspace_size(const BwdParams& p, int64_t* bytes) {
  FLASHLAB_RETURN_IF_ERROR(detail::validate_config(p));
  const detail::Backend* b = nullptr;
  FLASHLAB_RETURN_IF_ERROR(detail::select(p, true, &b));
  *bytes = 0;
  return b->backward_workspace ? b->backward_workspace(p, bytes) : Status::Ok();
}

Status resolve_impl(const AttentionConfig& c, Impl* out) {
  FLASHLAB_RETURN_IF_ERROR(detail::validate_config(c));
  const detail::Backend* b = nullptr;
  FLASHLAB_RETURN_IF_ERROR(detail::select(c, false, &b));
  *out = b->impl;
  return Status::Ok();
}

std::vector<ImplInfo> list_implementations() {
  std::vector<ImplInfo> v;
  for (const detail::Backend& b : detail::kBackends)
    v.push_back(ImplInfo{b.impl, b.name(), b.device, detail::available(b), b.description, b.experimental});
  return v;
}

const char* to_string(Impl impl) {
  for (const detail::ImplName& n : detail::kImplNames)
    if (n.impl == impl) return n.name;
  return "unknown";
}

const char* to_string(Device d) {
  return d == Device::kCPU ? "cpu" : d == Device::kCUDA ? "cuda" : "unknown";
}

Status parse_impl(const std::string& name, Impl* out) {
  std::string known;
  for (const detail::ImplName& n : detail::kImplNames) {
    if (name == n.name) {
      *out = n.impl;
      return Status::Ok();
    }
    known += (known.empty() ? "" : ", ") + std::string(n.name);
  }
  return Status::Invalid("impl '" + name + "' is unknown: expected one of " + known);
}

Status parse_dtype(const std::string& name, DType* out) {
  if (name == "fp32" || name == "float32")
    *out = DType::kFloat32;
  else if (name == "fp16" || name == "float16")
    *out = DType::kFloat16;
  else if (name == "bf16" || name == "bfloat16")
    *out = DType::kBFloat16;
  else if (name == "fp8_e4m3")
    *out = DType::kFloat8E4M3;
  else
    return Status::Invalid("dtype '" + name + "' is unknown: expected fp32, fp16 or bf16");
  return Status::Ok();
}

BuildInfo build_info() {
  BuildInfo bi;
  bi.version = FLASHLAB_VERSION_STRING;
  bi.cuda_compiled = detail::cuda_compiled();
  bi.cuda_archs = FLASHLAB_BUILD_CUDA_ARCHS;
  bi.cuda_version = bi.cuda_compiled ? FLASHLAB_BUILD_CUDA_VERSION : "";
  bi.compiler = FLASHLAB_BUILD_CXX;
  bi.cpu_flags = FLASHLAB_BUILD_CPU_FLAGS;
  bi.cuda_device_count = detail::cuda_device_count();
  bi.cuda_devices = detail::cuda_device_names();
  return bi;
}

}  // namespace flashlab
