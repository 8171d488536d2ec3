// learn/kernels/backward_common.cuh — what every backward learning kernel shares.
//
// The backward pass of attention (one head, softmax_scale = c, rows i = queries, cols j = keys):
//   S  = c·Q·Kᵀ            P  = exp(S − LSE)         (recomputed from the forward's LSE)
//   dV = Pᵀ·dO             dP = dO·Vᵀ
//   D  = rowsum(dO ∘ O)    dS = P ∘ (dP − D)         (softmax Jacobian, see docs/learn)
//   dQ = c·dS·K            dK = c·dSᵀ·Q
//
// This header holds the device-side view of BwdParams (BwdArgs), the workspace every version
// after v0 uses (fp32 dQ accumulator, D, LSE·log2e), the pre/post-processing kernels around the
// main kernels, and the per-version entry points that learn/api_backward.cu dispatches to.
#pragma once

#include <cstdint>
#include <string>

#include "flashlab/flashlab.h"
#include "kernels/common.cuh"

namespace flashlab {
namespace learn_bwd {

using learn::kLog2e;  // kernels/common.cuh: shared with the forward kernels

// Errors go through kernels/common.cuh: LEARN_CUDA_TRY(call), LEARN_CUBLAS_TRY(call),
// LEARN_LAUNCH_TRY() after a launch. Each returns a kDeviceError Status naming the call.

// ---- element types: the kernels are templates over T = __nv_bfloat16 or __half
template <typename T>
__device__ __forceinline__ float to_float(T x) { return learn::ElemTraits<T>::to_float(x); }
template <typename T>
__device__ __forceinline__ T from_float(float x) { return learn::ElemTraits<T>::from_float(x); }

// ---- device-side view of one backward call (plain values, passed by value to every kernel).
// The shape fields (batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, scale_log2 with
// P = exp2(s·scale_log2 − lse2), causal) are the forward kernels' too: learn::KernelShape.
struct Strides {
  int64_t batch = 0, row = 0, head = 0;  // elements
};
struct BwdArgs : learn::KernelShape {
  const void *q, *k, *v, *o, *dout;
  void *dq, *dk, *dv;
  Strides q_st, k_st, v_st, o_st, do_st, dq_st, dk_st, dv_st;
  const float* lse;  // (batch, heads_q, seqlen_q) from the forward pass
  int64_t lse_batch_stride, lse_head_stride;

  int group;         // heads_q / heads_kv (GQA)
  DType dtype;       // kBFloat16 or kFloat16 (selects the template instance)
  float scale;       // softmax_scale
  int shift;         // seqlen_k − seqlen_q: key j visible from query i iff j <= i + shift (causal)

  // Workspace (versions 1..4; see Workspace below).
  float* dq_acc;     // (batch, heads_q, seqlen_q, head_dim) fp32, zeroed by the preprocessing
  float* lse2;       // (batch, heads_q, rows_pad): LSE·log2e, +inf for rows with no key or padding
  float* dvec;       // (batch, heads_q, rows_pad): D = rowsum(dO ∘ O), 0 on padding rows
  int* dq_turn;      // (batch, heads_q, q_blocks) deterministic dQ order, or null (atomics)
  int rows_pad;      // seqlen_q rounded up to kRowPad
  int turn_block_m;  // query rows per dq_turn entry (the kernel's Q block)
};

// lse2 / dvec rows are padded to a multiple of this, so kernels load whole Q blocks unguarded.
constexpr int kRowPad = 128;

__host__ __device__ inline int64_t elem_index(const Strides& s, int64_t b, int64_t row, int64_t h) {
  return b * s.batch + row * s.row + h * s.head;
}
__host__ __device__ inline int64_t row_stat_index(const BwdArgs& a, int b, int h, int row) {
  return (static_cast<int64_t>(b) * a.heads_q + h) * a.rows_pad + row;
}
__host__ __device__ inline int64_t dq_acc_index(const BwdArgs& a, int b, int h, int row) {
  return ((static_cast<int64_t>(b) * a.heads_q + h) * a.seqlen_q + row) * a.head_dim;
}
// Causal visibility (bottom-right alignment, the API's default and the only one learn/ supports).
__device__ __forceinline__ bool visible(const BwdArgs& a, int i, int j) {
  return !a.causal || j <= i + a.shift;
}
// The deterministic-dQ counter of (batch b, query head h, query block m), or null (atomic dQ).
__device__ __forceinline__ int* dq_turn_slot(const BwdArgs& a, int b, int h, int q_blocks, int m) {
  return a.dq_turn ? a.dq_turn + (static_cast<int64_t>(b) * a.heads_q + h) * q_blocks + m : nullptr;
}
// Stages lse2 and D of query rows [i0, i0 + ROWS) in shared memory (v2, v3). The workspace rows
// are padded to kRowPad, so there is no bounds check (padding rows hold +inf / 0).
template <int ROWS>
__device__ __forceinline__ void load_row_stats(float* lse2, float* d, const BwdArgs& a, int b, int h,
                                               int i0) {
  if (threadIdx.x < ROWS) {
    lse2[threadIdx.x] = a.lse2[row_stat_index(a, b, h, i0 + threadIdx.x)];
    d[threadIdx.x] = a.dvec[row_stat_index(a, b, h, i0 + threadIdx.x)];
  }
}

BwdArgs make_args(const BwdParams& p);

// ---- workspace: one device allocation split into the arrays above
struct Workspace {
  void* base = nullptr;
  bool owned = false;       // allocated here with cudaMallocAsync (else p.workspace)
  cudaStream_t stream = nullptr;
  int64_t bytes = 0;
};
// Bytes needed by versions 1..4 for these params (turn_block_m > 0: deterministic dQ order).
int64_t workspace_bytes(const BwdParams& p, int turn_block_m);
// Carves the workspace into args.dq_acc / lse2 / dvec / dq_turn. Uses p.workspace when it is big
// enough, else cudaMallocAsync on the stream (freed by release()).
Status acquire_workspace(const BwdParams& p, int turn_block_m, BwdArgs* args, Workspace* ws);
Status release_workspace(Workspace* ws);

// ---- the kernels around every FA-2 style backward (backward_common.cu)
// D = rowsum(dO ∘ O), lse2 = LSE·log2e (+inf where LSE = -inf or on padding rows), dq_acc = 0,
// dq_turn = 0. One warp per query row.
Status launch_preprocess(const BwdArgs& a, cudaStream_t stream);
// dq = scale · dq_acc, rounded to the element type, written with the caller's strides.
Status launch_postprocess_dq(const BwdArgs& a, cudaStream_t stream);
// dq_acc = 0 and nothing else (v1, which computes D itself, and seqlen_k = 0).
Status zero_dq_acc(const BwdArgs& a, cudaStream_t stream);

// ---- the host side of every FA-style version: BwdArgs from the params, the workspace, a
// prologue, the version's main kernel (`launch_main(args, stream)`), dq = scale·dq_acc, and the
// workspace released on every path. The first error wins.
enum class Prologue {
  kZeroDqAcc,   // zero_dq_acc: v1 recomputes D per tile (FlashAttention-1)
  kPreprocess,  // launch_preprocess: D and lse2 once per row (v2..v4)
};
template <typename LaunchMain>
Status run_with_workspace(const BwdParams& p, int turn_block_m, Prologue prologue, LaunchMain&& launch_main) {
  cudaStream_t stream = static_cast<cudaStream_t>(p.stream);
  BwdArgs a = make_args(p);
  Workspace ws;
  FLASHLAB_RETURN_IF_ERROR(acquire_workspace(p, turn_block_m, &a, &ws));
  Status st = prologue == Prologue::kPreprocess ? launch_preprocess(a, stream) : zero_dq_acc(a, stream);
  if (st.ok()) st = launch_main(a, stream);
  if (st.ok()) st = launch_postprocess_dq(a, stream);
  const Status rs = release_workspace(&ws);
  FLASHLAB_RETURN_IF_ERROR(st);
  return rs;
}

// ---- deterministic dQ: the key blocks that add into one query block take turns in a fixed order.
// A counter per (batch, head, query block) says how many have added so far: a block whose place
// in the order is k waits until the counter equals k, adds, and sets it to k + 1. v2 and v3 use
// ascending key-block order (place k = n); v4 descending (backward_v4.cu says why). It cannot
// deadlock as long as every block waits only for blocks dispatched before it (blocks are dispatched
// in blockIdx order, and the kernels map blockIdx.x to key blocks accordingly); FlashAttention-3's
// deterministic mode relies on the same property.
__device__ __forceinline__ void dq_turn_wait(const int* turn, int k) {
  if (turn == nullptr) return;
  if (threadIdx.x == 0) {
    int seen;
    do {
      asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(seen) : "l"(turn));
    } while (seen != k);
  }
  __syncthreads();
}
__device__ __forceinline__ void dq_turn_pass(int* turn, int k) {
  if (turn == nullptr) return;
  __threadfence();  // each thread's dQ additions are visible device-wide before the hand-over
  __syncthreads();
  if (threadIdx.x == 0) asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(turn), "r"(k + 1) : "memory");
}

// ---- per-version entry points (learn/kernels/backward_vN.cu), dispatched by learn/api_backward.cu
Status backward_v0(const BwdParams& p);
Status backward_v1(const BwdParams& p);
Status backward_v2(const BwdParams& p);
Status backward_v3(const BwdParams& p);
Status backward_v4(const BwdParams& p);

// Device memory a version allocates beyond the inputs and outputs (for the harness' report).
int64_t extra_memory_bytes(int version, const BwdParams& p);

}  // namespace learn_bwd
}  // namespace flashlab
