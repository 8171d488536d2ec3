// src/cuda/common/ptx_sm80.cuh — the Ampere-generation instructions (sm_80 and later, Hopper
// included) as thin inline-PTX wrappers, written down once: ldmatrix, mma.sync.m16n8k16, cp.async.
// Used by the decode tile kernel (src/cuda/decode/decode_tile_kernel.cuh) and the learning lab's
// tensor-core kernels (learn/kernels/mma.cuh explains the fragment layouts for a learner).
//
// Fragment layouts of mma.m16n8k16 (g = lane / 4, t = lane % 4):
//   A: a0 = (row g, k 2t..2t+1)  a1 = (row g+8, k 2t..)  a2 = (row g, k 2t+8..)  a3 = (row g+8, k 2t+8..)
//   B: b0 = (k 2t..2t+1, col g)  b1 = (k 2t+8.., col g)
//   C: c0, c1 = (row g, cols 2t, 2t+1)    c2, c3 = (row g+8, cols 2t, 2t+1)
// ldmatrix.x4: lanes 8m..8m+7 give the row addresses of matrix m; register m is matrix m's
// fragment (.trans transposes each 8 x 8 matrix on the way).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

namespace flashlab {
namespace ptx {

__device__ __forceinline__ uint32_t smem_u32(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}
// A 4-, 8- or 16-byte load / store at a generic pointer into shared memory, as ld.shared /
// st.shared. Where the compiler cannot tell that a pointer is a shared one (an out-of-line
// function's argument) it emits generic loads and stores; the decode tile kernel's out-of-line
// rotation reads its staged rows with these (~0.3 µs of a 40 µs step at 1k on the H200:
// docs/perf.md, session 33). The "memory" clobber keeps them in order with the compiler's own
// shared-memory accesses.
template <typename W>
__device__ __forceinline__ W lds(const void* ptr) {
  static_assert(sizeof(W) == 4 || sizeof(W) == 8 || sizeof(W) == 16, "4, 8 or 16 bytes");
  uint32_t r[sizeof(W) / 4];
  if constexpr (sizeof(W) == 16)
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(ptr))
                 : "memory");
  else if constexpr (sizeof(W) == 8)
    asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(smem_u32(ptr))
                 : "memory");
  else
    asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(r[0]) : "r"(smem_u32(ptr)) : "memory");
  W w;
  memcpy(&w, r, sizeof(W));
  return w;
}
__device__ __forceinline__ void sts16(void* ptr, const uint4& v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_u32(ptr)), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(ptr)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(ptr)));
}

// D += A · B for T = __nv_bfloat16 or __half, fp32 accumulators.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma_16816<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// cp.async: 16 bytes global -> shared, bypassing registers, completing asynchronously;
// fill = false writes 16 zero bytes and reads nothing (src-size 0). commit_group closes a batch;
// wait_group<N> waits until at most N committed batches are still in flight.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool fill) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem),
               "r"(fill ? 16 : 0));
}
// Programmatic dependent launch (common/launch.h, launch_kernel; sm_90 and later, no-ops before):
// grid_dependency_wait blocks until the stream's previous kernel has completed and its writes are
// visible (at once when this kernel was not launched as its dependent); grid_dependents_launch lets
// the next kernel, launched as this one's dependent, start its CTAs.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_dependents_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" :::);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace ptx
}  // namespace flashlab
