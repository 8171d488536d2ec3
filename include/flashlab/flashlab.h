// flashlab/flashlab.h — the public C++ API.
//
//   flashlab::FwdParams p;            // fill pointers, strides, sizes, flags (see params.h)
//   flashlab::Status st = flashlab::attention_forward(p);
//   if (!st.ok()) std::cerr << st.to_string() << "\n";   // nothing was written
//
// Every call validates its arguments first; on error it returns a Status naming the argument and
// the rule broken and writes no output. LSE is in natural log; a query row that sees no key gets
// output 0 and LSE -inf (its gradients are 0), or LSE = its head's sink logit with sink_logits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashlab/dtype.h"
#include "flashlab/params.h"
#include "flashlab/status.h"

namespace flashlab {

// ---- the two passes
Status attention_forward(const FwdParams& params);
Status attention_backward(const BwdParams& params);

// Checks only (no output is touched): generic rules plus the selected implementation's limits.
Status validate_forward(const FwdParams& params);
Status validate_backward(const BwdParams& params);

// Device scratch a CUDA implementation needs in AttentionConfig::workspace (0 on the CPU). Checks
// the configuration and selects the implementation; the tensors are checked by the call itself.
// The forward's is optional: cuda_sm90 asks for 16 bytes for causal calls it schedules dynamically
// (a tile counter, zeroed by each call); without a workspace such a call runs, scheduled
// statically (slower, same result). The backward's is required where it is not 0.
Status forward_workspace_size(const FwdParams& params, int64_t* bytes);
Status backward_workspace_size(const BwdParams& params, int64_t* bytes);

// ---- implementations
struct ImplInfo {
  Impl impl;
  const char* name;         // "reference", "cpu_flash", "learn_v4", ...
  Device device;
  bool available;           // compiled in and (for CUDA) a device is present
  const char* description;
  bool experimental = false;  // not yet verified on a GPU: only run when named explicitly
};
std::vector<ImplInfo> list_implementations();
const char* to_string(Impl impl);
const char* to_string(Device device);
Status parse_impl(const std::string& name, Impl* out);
Status parse_dtype(const std::string& name, DType* out);
// The implementation kAuto resolves to for these params (error if none can run them).
Status resolve_impl(const AttentionConfig& config, Impl* out);

// ---- work counting (one shared, mask-aware definition; benchmarks use it for TFLOP/s)
// Forward: 4 * head_dim per visible (query, key) pair and head (Q·Kᵀ and P·V);
// backward: 2.5x the forward (five matrix products instead of two).
// For variable-length batches pass host copies of cu_seqlens (or null for fixed lengths).
struct AttentionFlops {
  double forward = 0;
  double backward = 0;
  int64_t visible_pairs = 0;  // summed over batch and query heads
};
AttentionFlops attention_flops(const AttentionConfig& config, const int32_t* host_cu_seqlens_q = nullptr,
                               const int32_t* host_cu_seqlens_k = nullptr);

// ---- build information
struct BuildInfo {
  std::string version;
  bool cuda_compiled = false;
  std::string cuda_archs;      // e.g. "80;90a"
  std::string cuda_version;    // nvcc that built it, or ""
  std::string compiler;        // host compiler
  std::string cpu_flags;       // -march used for the CPU backends
  int cuda_device_count = 0;   // found at run time
  std::vector<std::string> cuda_devices;  // "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)"
};
BuildInfo build_info();

}  // namespace flashlab

// ---- inference: attention against a K/V cache (flashlab/kvcache.h, docs/kvcache.md)
#include "flashlab/kvcache.h"

namespace flashlab {

// Appends k_new/v_new (rotary applied to k) into the cache, then attends q to the attended keys.
// Validates everything first (on the CPU also cache_seqlens, leftpad and the page table entries):
// on error nothing, cache included, is written.
Status attention_with_kvcache(const KvCacheParams& params);
// The append (and rotary on the new keys) only; q, out, lse are not used.
Status kvcache_append(const KvCacheParams& params);
// Device scratch attention_with_kvcache needs in workspace (0 on the CPU).
Status kvcache_workspace_size(const KvCacheParams& params, int64_t* bytes);
// Merges split-KV partial results (CombineParams, flashlab/kvcache.h).
Status attention_combine(const CombineParams& params);

}  // namespace flashlab
