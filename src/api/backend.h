// src/api/backend.h — the functions each backend exports to the dispatcher (the rows of kBackends
// in dispatch.cpp).
//
// The dispatcher (dispatch.cpp) has already validated the params with the generic rules
// (validate.cpp) and the backend's own limits, and resolved defaults: softmax_scale is finite,
// impl is concrete. Backends return kOutOfMemory / kDeviceError / kInternal only.
#pragma once

#include <vector>

#include "flashlab/flashlab.h"
#include "flashlab/kvcache.h"

namespace flashlab {
namespace detail {

// CPU, src/cpu/reference*.cpp: float64, materializes S and P.
Status reference_forward(const FwdParams& p);
Status reference_backward(const BwdParams& p);

// CPU, src/cpu/cpu_flash*.cpp: FlashAttention-2 on the CPU.
Status cpu_flash_forward(const FwdParams& p);
Status cpu_flash_backward(const BwdParams& p);
namespace kv {
// The KV-cache path (docs/kvcache.md) on cpu_flash's forward, src/cpu/kvcache_cpu_flash.cpp:
// append, gather the attended keys, one varlen cpu_flash_forward. Arguments validated, scale finite.
Status cpu_flash_kvcache(const KvCacheParams& p);
}  // namespace kv

#if defined(FLASHLAB_WITH_CUDA)
// CUDA learning kernels, learn/ (versions 0..4). Tensors, lse and cu_seqlens are device pointers.
// learn_supports() says whether `version` can run this configuration (an unsupported feature is
// reported as kUnsupported naming the feature); forward in learn/api_forward.cu, backward in
// learn/api_backward.cu.
Status learn_supports(int version, const AttentionConfig& c, bool backward);
Status learn_forward(int version, const FwdParams& p);
Status learn_backward(int version, const BwdParams& p);
#endif

#if defined(FLASHLAB_WITH_CUDA_SM80)
// Production CuTe kernels for sm80 and later, src/cuda/sm80/ (api_sm80.cpp): verified on the H100
// and the first choice of kAuto for CUDA calls. The backward takes all its scratch from
// p.workspace: sm80_backward_workspace_size() says how much (p.softmax_scale need not be resolved).
Status sm80_supports(const AttentionConfig& c, bool backward);
Status sm80_forward(const FwdParams& p);
Status sm80_backward(const BwdParams& p);
Status sm80_backward_workspace_size(const BwdParams& p, int64_t* bytes);
#endif

#if defined(FLASHLAB_WITH_CUDA_SM90)
// The Hopper kernels (TMA, wgmma, warp specialization), src/cuda/sm90/ (api_sm90.cpp): sm_90
// devices only. Dropout and sink tokens beside a left window in the forward above head dim 192 are
// refused (kUnsupported naming cuda_sm80), so kAuto serves them with cuda_sm80.
// sm90_forward_accepts / sm90_backward_accepts: the tensors' part (16-byte alignment, strides TMA
// can describe); the dispatcher calls them before
// choosing the row, so kAuto falls back to cuda_sm80 when they refuse.
Status sm90_supports(const AttentionConfig& c, bool backward);
Status sm90_forward_accepts(const FwdParams& p);
Status sm90_forward(const FwdParams& p);
Status sm90_forward_workspace_size(const FwdParams& p, int64_t* bytes);
Status sm90_backward_accepts(const BwdParams& p);
Status sm90_backward(const BwdParams& p);
Status sm90_backward_workspace_size(const BwdParams& p, int64_t* bytes);
#endif

#if defined(FLASHLAB_WITH_CUDA_DECODE)
// The CUDA KV-cache path (src/cuda/decode/; impl auto, cuda_sm80 or its alias cuda_sm90).
// cuda_kvcache_supports: after the generic checks (src/api/kvcache.cpp), what the kernels cover;
// attend = false is the standalone append.
Status cuda_kvcache_supports(const KvCacheParams& p, bool attend);
Status cuda_kvcache_workspace_size(const KvCacheParams& p, int64_t* bytes);
Status cuda_attention_with_kvcache(const KvCacheParams& p);  // fused append + rotary, then attention
Status cuda_kvcache_append(const KvCacheParams& p);
Status cuda_attention_combine(const CombineParams& p);
// Host copies of the int32 side arrays (check_device_data): cache_seqlens (batch), leftpad
// (batch), cache_batch_idx (batch), block_table (batch rows): copied on the call's stream, then
// synchronized. A null array gives an empty vector.
struct SideArrays {
  std::vector<int32_t> seqlens, leftpad, batch_idx, table;
};
Status cuda_fetch_side_arrays(const KvCacheParams& p, SideArrays* out);
#endif

// Largest head_dim the CPU backends accept (cpu_flash keeps a row of O in registers/stack).
constexpr int64_t kCpuMaxHeadDim = 512;

}  // namespace detail
}  // namespace flashlab
