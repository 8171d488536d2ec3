// src/cuda/decode/kvcache_ops.h — launches shared inside src/cuda/decode/ (kvcache_ops.cu): the
// append (append_kernel.cuh; the standalone kvcache_append and the fused append of
// attention_with_kvcache) and the split combine (combine_kernel.cuh; the decode kernels' splits
// and the public attention_combine).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "flashlab/kvcache.h"
#include "flashlab/status.h"

namespace flashlab {
namespace decode {
struct CombineArgs;
}  // namespace decode
namespace detail {

// Bytes of the rotated-query copy the fused path keeps in the workspace (0 without rotary).
int64_t rotated_q_bytes(const KvCacheParams& p);

// kUnsupported when the append's 32-bit index math cannot cover these sizes.
Status append_supports(const KvCacheParams& p, bool attend);

// Launches the append of p.k_new / p.v_new (with rotary on k), and with q_rot non-null the
// rotation of p.q into q_rot (dense (batch, seqlen_q, heads_q, head_dim)), on p.stream.
// Arguments must have been validated. Nothing to append and no q_rot: no launch. *launched (when
// given) says whether a kernel was launched: the decode kernel is launched as its programmatic
// dependent only then (never as the dependent of whatever kernel came before in the stream).
Status launch_append(const KvCacheParams& p, void* q_rot, bool* launched = nullptr);

// Launches combine_kernel<dtype> (bf16, fp16, fp32 outputs) over a's rows on `stream`.
Status launch_combine(const decode::CombineArgs& a, DType dtype, cudaStream_t stream, bool pdl = false);

}  // namespace detail
}  // namespace flashlab
