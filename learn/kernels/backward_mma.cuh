// learn/kernels/backward_mma.cuh — the tensor-core and async-copy instructions of v3/v4 backward,
// as thin inline-PTX wrappers, plus the fragment layouts they use (written down once, here).
//
// mma.sync.m16n8k16 (row.col), 16-bit inputs, fp32 accumulators. With g = lane/4, t = lane%4:
//   A (16×16, row-major) : 4 regs of 2 halves   a0 (g, 2t..2t+1)   a1 (g+8, 2t..)   a2 (g, 2t+8..)   a3 (g+8, 2t+8..)
//   B (16×8,  k × n)     : 2 regs of 2 halves   b0 (k 2t..2t+1, n g)                b1 (k 2t+8.., n g)
//   C (16×8)             : 4 floats             c0,c1 (g, 2t..2t+1)                 c2,c3 (g+8, 2t..2t+1)
// Note that C's layout equals A's for one 8-column half: two adjacent C tiles, packed to 16 bits,
// ARE an A fragment. That is how Pᵀ and dSᵀ go from one product into the next without shared memory.
//
// ldmatrix.x4 loads four 8×8 16-bit matrices; lane l gives the row address of matrix l/8, row l%8.
// Without .trans thread (g, t) receives row g, columns 2t..2t+1 of each matrix; with .trans it
// receives column g, rows 2t..2t+1 — i.e. the transposed matrix, for free, during the load.
#pragma once

#include <cstdint>

#include "kernels/backward_common.cuh"

namespace flashlab {
namespace learn_bwd {
namespace mma {

template <typename T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma_16816<__half>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// Two floats → one register of two 16-bit values (lo in the low half: the lower column).
template <typename T>
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
  const typename learn::ElemTraits<T>::Pair p = learn::ElemTraits<T>::pack(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&p);
}

// Accumulator tiles c[2kk], c[2kk+1] (a 16×16 slab) as the A operand of the next product.
template <typename T>
__device__ __forceinline__ void acc_to_a(uint32_t (&a)[4], const float (&lo)[4], const float (&hi)[4]) {
  a[0] = pack<T>(lo[0], lo[1]);
  a[1] = pack<T>(lo[2], lo[3]);
  a[2] = pack<T>(hi[0], hi[1]);
  a[3] = pack<T>(hi[2], hi[3]);
}

// ---- cp.async (v4): 16-byte global → shared copies that bypass the registers.
// src_bytes = 0 writes 16 zero bytes (rows past the end of the sequence) without reading.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace mma
}  // namespace learn_bwd
}  // namespace flashlab
