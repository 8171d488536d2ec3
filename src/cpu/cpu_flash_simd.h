// src/cpu/cpu_flash_simd.h — the one SIMD vocabulary of cpu_flash: a float vector type, loads,
// stores, broadcasts and a vectorized exp2.
//
// Why GCC/Clang vector extensions and not intrinsics: the same source compiles to AVX-512, AVX2 or
// SSE depending on FLASHLAB_CPU_ARCH, and the micro-kernels can keep an accumulator tile in named
// registers (plain arrays of floats, by contrast, are often left in memory by the auto-vectorizer).
// Products are written `acc += a * b`; g++ contracts them into FMAs (C++ keeps -ffp-contract=fast
// even with -std=c++17; benchmarks/cpu_flash_vs_sgemm.cpp would show a 2x drop if that changed).
#pragma once

#include <cstdint>
#include <cstring>

// Everything in these headers lives in an inline namespace named after the instruction set it was
// compiled for. Without it, a program that includes them with other -march flags (a test, a
// benchmark) would define the same mangled inline functions (micro_kernel<6, 4, ...>) with other
// vector widths, and the dynamic linker could bind the library's calls to those copies.
#if defined(__AVX512F__)
#define FLASHLAB_CPU_ISA avx512
#elif defined(__AVX__)
#define FLASHLAB_CPU_ISA avx
#else
#define FLASHLAB_CPU_ISA baseline
#endif

namespace flashlab {
namespace detail {
inline namespace FLASHLAB_CPU_ISA {
namespace simd {

// Floats per vector and architectural vector registers: the micro-kernel tile sizes depend on both.
#if defined(__AVX512F__)
constexpr int kWidth = 16;
constexpr int kRegisters = 32;
#elif defined(__AVX__)
constexpr int kWidth = 8;
constexpr int kRegisters = 16;
#else
constexpr int kWidth = 4;
constexpr int kRegisters = 16;
#endif

typedef float VecF __attribute__((vector_size(kWidth * sizeof(float))));
typedef int32_t VecI __attribute__((vector_size(kWidth * sizeof(int32_t))));

constexpr float kLog2e = 1.4426950408889634f;  // exp(x) = exp2(x * kLog2e)
constexpr float kLn2 = 0.6931471805599453f;    // ln(x) = log2(x) * kLn2
constexpr float kNegInf = -__builtin_huge_valf();

// Unaligned loads and stores: memcpy of a whole vector compiles to one vmovups.
inline VecF load(const float* p) {
  VecF v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void store(float* p, VecF v) { std::memcpy(p, &v, sizeof(v)); }
inline VecI load_i(const int32_t* p) {
  VecI v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
// x - 0 is x for every x (0 + x is not: -0), so the compiler drops the subtraction: a pure broadcast.
inline VecF splat(float x) { return x - VecF{}; }
inline VecI splat_i(int32_t x) { return VecI{} + x; }

inline VecF vmax(VecF a, VecF b) { return a > b ? a : b; }
inline VecF select(VecI mask, VecF if_true, VecF if_false) { return mask ? if_true : if_false; }

// 2^x with a relative error of about 1 ulp of float for x in [-126, 128); exactly 0 below -126
// (so a masked score of -inf gives a probability of exactly 0), NaN stays NaN.
//   x = n + f with n = round(x), |f| <= 1/2;  2^x = 2^n * 2^f;
//   2^f from its Taylor series in f*ln2 to degree 7 (truncation error < 6e-9, below half an ulp),
//   2^n by adding n to the exponent bits.
inline VecF exp2(VecF x) {
  const VecF lo = splat(-126.0f);
  const VecF hi = splat(127.0f);
  VecF xc = x < lo ? lo : x;  // written so that NaN passes through both clamps
  xc = xc > hi ? hi : xc;
  const VecF kRound = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const VecF n = (xc + kRound) - kRound;
  const VecF f = xc - n;
  // Coefficients ln2^k / k!, k = 7..0.
  VecF p = splat(1.5252733804059840e-05f);
  p = p * f + 1.5403530393381609e-04f;
  p = p * f + 1.3333558146428443e-03f;
  p = p * f + 9.6181291076284772e-03f;
  p = p * f + 5.5504108664821580e-02f;
  p = p * f + 2.4022650695910071e-01f;
  p = p * f + 6.9314718055994531e-01f;
  p = p * f + 1.0f;
  const VecI e = __builtin_convertvector(n, VecI) << 23;
  const VecF r = reinterpret_cast<VecF>(reinterpret_cast<VecI>(p) + e);
  return x < lo ? VecF{} : (x == x ? r : x);
}

inline float reduce_sum(VecF v) {
  float s = 0.0f;
  for (int i = 0; i < kWidth; ++i) s += v[i];
  return s;
}

}  // namespace simd
}  // namespace FLASHLAB_CPU_ISA
}  // namespace detail
}  // namespace flashlab
