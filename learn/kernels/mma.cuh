// learn/kernels/mma.cuh — the tensor-core and copy instructions of v3/v4, as thin inline-PTX wrappers.
//
// mma.sync.m16n8k16 (Ampere and later, also on Hopper): one warp computes D(16×8, fp32) +=
// A(16×16) · B(16×8) with A, B in bf16 or fp16. Each lane holds a fixed piece of each operand
// (g = lane / 4, t = lane % 4):
//   A: a0 = (row g,   k 2t..2t+1)   a1 = (row g+8, k 2t..2t+1)
//      a2 = (row g,   k 2t+8..+9)   a3 = (row g+8, k 2t+8..+9)        (two 16-bit values each)
//   B: b0 = (k 2t..2t+1, col g)     b1 = (k 2t+8..2t+9, col g)
//   C: c0, c1 = (row g, cols 2t, 2t+1)    c2, c3 = (row g+8, cols 2t, 2t+1)
// The C layout of two adjacent 8-column tiles is exactly the A layout of one 16-wide k-step: that is
// why P can stay in registers between S = Q·Kᵀ and O = P·V (FlashAttention-2's trick).
//
// ldmatrix.x4 loads four 8×8 16-bit matrices from shared memory in that fragment layout; lanes
// 8m..8m+7 give the row addresses of matrix m. The .trans form transposes each matrix on the way,
// which turns row-major V (keys × dims) into the B operand of P·V.
//
// The forward (v3, v4) and backward (v3, v4, through kernels/backward_mma.cuh) kernels share these
// wrappers: each instruction is written down once.
#pragma once

#include <cstdint>

#include "cuda/common/ptx_sm80.cuh"
#include "kernels/common.cuh"

namespace flashlab {
namespace learn {

// The instructions themselves are written once, for the library and this lab:
// src/cuda/common/ptx_sm80.cuh (namespace flashlab::ptx).
__device__ __forceinline__ uint32_t smem_addr(const void* p) { return ptx::smem_u32(p); }
using ptx::ldmatrix_x4;
using ptx::ldmatrix_x4_trans;
using ptx::mma_16816;  // D += A · B for T = __nv_bfloat16 or __half, fp32 accumulators

// Two fp32 values as one register of two 16-bit values (low half = first, the lower column).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  const typename ElemTraits<T>::Pair v = ElemTraits<T>::pack(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// 2^x in one MUFU.EX2 (exp2f adds range handling we do not need: x <= 0 or -inf here).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// ---- cp.async (v4): 16-byte global -> shared copies that bypass registers and complete
// asynchronously; commit_group closes a batch, wait_group<N> waits until at most N batches are
// still in flight. valid = false writes zeros (rows past the end of the sequence).
using ptx::cp_async_16;
using ptx::cp_async_commit;
using ptx::cp_async_wait;

}  // namespace learn
}  // namespace flashlab
