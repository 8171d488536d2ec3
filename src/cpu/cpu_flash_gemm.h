// src/cpu/cpu_flash_gemm.h — the register-blocked micro-kernel behind every product in cpu_flash.
//
//   C (M x N) = [0 | C | row_scale ∘ C] + A (M x K) · B (K x N)
//
// A is read one scalar at a time and broadcast, so it may have any strides: the same kernel
// computes Q·Kᵀ, Pᵀ·V-style products with a transposed A, and dSᵀ·Q, without copying A.
// B and C are row-major fp32 tiles whose N columns are padded to a multiple of the vector width.
//
// The micro-kernel keeps an R x NV-vector block of C in registers for the whole K loop; per k it
// loads NV vectors of B and does R*NV FMAs, each with one broadcast scalar of A (folded into
// the FMA as a memory operand on AVX-512). That ratio of FMAs to loads is what makes it fast.
#pragma once

#include <algorithm>
#include <cstdint>

#include "cpu/cpu_flash_simd.h"

namespace flashlab {
namespace detail {
inline namespace FLASHLAB_CPU_ISA {
namespace gemm {

using simd::kWidth;
using simd::VecF;

// Register block: R rows x NV vectors of C. Chosen so that R*NV accumulators + NV B vectors
// (+1 broadcast without AVX-512) fit in the register file with a little room:
//   AVX-512 (32 registers): 6 x 4 -> 24 + 4 = 28 registers, 64 columns = one 64-wide tile row.
//   AVX2 / SSE (16 registers): 4 x 2 -> 8 + 2 + 1 = 11 (4 x 3 = 16 would spill).
constexpr int kRows = simd::kRegisters >= 32 ? 6 : 4;
constexpr int kVecs = simd::kRegisters >= 32 ? 4 : 2;

// What the kernel does with the C tile already in memory.
enum class Init : int { kZero, kAccumulate, kScaleRows };

template <int R, int NV, Init kInit>
void micro_kernel(int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t ldb,
                  float* c, int64_t ldc, const float* row_scale) {
  VecF acc[R][NV];  // (R, NV * kWidth) block of C
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      if (kInit == Init::kZero) {
        acc[r][v] = VecF{};
      } else {
        acc[r][v] = simd::load(c + r * ldc + v * kWidth);
        if (kInit == Init::kScaleRows) acc[r][v] *= row_scale[r];
      }
    }
  }
  for (int64_t k = 0; k < K; ++k) {
    VecF bk[NV];  // (NV * kWidth) columns of row k of B
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bk[v] = simd::load(b + k * ldb + v * kWidth);
    const float* ak = a + k * a_cs;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const VecF ar = simd::splat(ak[r * a_rs]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] += ar * bk[v];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) simd::store(c + r * ldc + v * kWidth, acc[r][v]);
  }
}

using KernelFn = void (*)(int64_t, const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t,
                          const float*);

// The instantiation for an (r, nv) edge block; full blocks use (kRows, kVecs).
template <Init kInit>
KernelFn select_kernel(int r, int nv) {
  static_assert(kRows <= 6 && kVecs <= 4, "extend the table below");
  static const KernelFn table[6][4] = {
      {&micro_kernel<1, 1, kInit>, &micro_kernel<1, 2, kInit>, &micro_kernel<1, 3, kInit>, &micro_kernel<1, 4, kInit>},
      {&micro_kernel<2, 1, kInit>, &micro_kernel<2, 2, kInit>, &micro_kernel<2, 3, kInit>, &micro_kernel<2, 4, kInit>},
      {&micro_kernel<3, 1, kInit>, &micro_kernel<3, 2, kInit>, &micro_kernel<3, 3, kInit>, &micro_kernel<3, 4, kInit>},
      {&micro_kernel<4, 1, kInit>, &micro_kernel<4, 2, kInit>, &micro_kernel<4, 3, kInit>, &micro_kernel<4, 4, kInit>},
      {&micro_kernel<5, 1, kInit>, &micro_kernel<5, 2, kInit>, &micro_kernel<5, 3, kInit>, &micro_kernel<5, 4, kInit>},
      {&micro_kernel<6, 1, kInit>, &micro_kernel<6, 2, kInit>, &micro_kernel<6, 3, kInit>, &micro_kernel<6, 4, kInit>},
  };
  return table[r - 1][nv - 1];
}

// C (M x N) = init(C) + A·B. N must be a multiple of kWidth; ldb, ldc >= N.
// A(m, k) = a[m * a_rs + k * a_cs]; row_scale (M entries) is read only for Init::kScaleRows.
template <Init kInit>
void matmul(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
            int64_t ldb, float* c, int64_t ldc, const float* row_scale = nullptr) {
  // Column chunks outside, row blocks inside: one (K x kVecs*kWidth) panel of B stays in L1 while
  // every row block of A streams past it.
  for (int64_t n0 = 0; n0 < N; n0 += kVecs * kWidth) {
    const int nv = static_cast<int>(std::min<int64_t>(kVecs, (N - n0) / kWidth));
    for (int64_t m0 = 0; m0 < M; m0 += kRows) {
      const int r = static_cast<int>(std::min<int64_t>(kRows, M - m0));
      select_kernel<kInit>(r, nv)(K, a + m0 * a_rs, a_rs, a_cs, b + n0, ldb, c + m0 * ldc + n0, ldc,
                                  row_scale ? row_scale + m0 : nullptr);
    }
  }
}

}  // namespace gemm
}  // namespace FLASHLAB_CPU_ISA
}  // namespace detail
}  // namespace flashlab
