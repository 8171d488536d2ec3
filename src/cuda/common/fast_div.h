// src/cuda/common/fast_div.h — division by a divisor fixed at launch, for kernels' index math.
//
// n / d and n % d for 0 <= n < 2^31 as one multiply-high and a shift (the round-up method of
// Granlund and Montgomery, as cutlass::FastDivmod): with p = 31 + ceil(log2 d) and
// m = ceil(2^p / d), n / d = floor(n · m / 2^p) for every such n. The magic numbers are computed on
// the host (the constructor); a division by a runtime value costs ~20 instructions (I2F.RP,
// MUFU.RCP, IMAD, corrections). Host and device code (tests/test_fast_div.cpp checks it on the CPU).
#pragma once

#include <cstdint>

#include "flashlab/config.h"  // FLASHLAB_HD

namespace flashlab {
namespace common {

FLASHLAB_HD uint32_t mulhi_u32(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((uint64_t(a) * b) >> 32);
#endif
}

struct FastDiv {
  int d = 1;
  uint32_t mul = 0, shift = 0;  // d == 1: n itself
  FastDiv() = default;
  // divisor >= 1.
  explicit FastDiv(int divisor) : d(divisor) {
    if (d > 1) {
      int log2_ceil = 0;
      while ((int64_t(1) << log2_ceil) < d) ++log2_ceil;
      const int p = 31 + log2_ceil;
      mul = static_cast<uint32_t>(((uint64_t(1) << p) + uint64_t(d) - 1) / uint64_t(d));
      shift = static_cast<uint32_t>(p - 32);
    }
  }
  FLASHLAB_HD int div(int n) const {
    return d == 1 ? n : static_cast<int>(mulhi_u32(static_cast<uint32_t>(n), mul) >> shift);
  }
  FLASHLAB_HD int divmod(int n, int* rem) const {
    const int q = div(n);
    *rem = n - q * d;
    return q;
  }
};

}  // namespace common
}  // namespace flashlab
