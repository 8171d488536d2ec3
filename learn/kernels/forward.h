// learn/kernels/forward.h — the forward entry point of each learning version (learn/api_forward.cu
// dispatches to these after learn_supports said yes). Each takes device pointers and runs on
// p.stream; each returns kDeviceError / kOutOfMemory with the CUDA error text on failure.
#pragma once

#include "flashlab/flashlab.h"

namespace flashlab {
namespace learn {

Status forward_v0(const FwdParams& p);  // standard attention: cuBLAS S = QK^T, softmax, cuBLAS O = PV
Status forward_v1(const FwdParams& p);  // FlashAttention-1 (Algorithm 1): O, l, m in global memory
Status forward_v2(const FwdParams& p);  // FlashAttention-2 loop order, online softmax in registers
Status forward_v3(const FwdParams& p);  // tensor cores: mma.sync m16n8k16 + ldmatrix, P in registers
Status forward_v4(const FwdParams& p);  // pipelined: cp.async stages, swizzle, causal skipping

// Writes out = 0 and lse = -inf for every row: the whole answer when seqlen_k == 0.
Status forward_no_keys(const FwdParams& p);

}  // namespace learn
}  // namespace flashlab
