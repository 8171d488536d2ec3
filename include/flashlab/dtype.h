// flashlab/dtype.h — element types and exact host-side conversions.
//
// fp16 and bf16 are stored as raw 16-bit patterns (uint16_t) so that the public API needs no CUDA
// headers. The conversions below round to nearest-even, matching __float2half_rn / __float2bfloat16_rn,
// so the CPU backends and tests see exactly the values a GPU kernel sees.
#pragma once

#include <cstdint>
#include <cstring>

#include "flashlab/config.h"

namespace flashlab {

enum class DType : int {
  kFloat32 = 0,
  kFloat16 = 1,
  kBFloat16 = 2,
  kFloat8E4M3 = 3,  // reserved: no backend accepts it yet
};

const char* to_string(DType dtype);
inline int64_t dtype_size(DType d) {
  switch (d) {
    case DType::kFloat32: return 4;
    case DType::kFloat16:
    case DType::kBFloat16: return 2;
    case DType::kFloat8E4M3: return 1;
  }
  return 0;
}

inline float bits_to_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t float_to_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

// bf16 is the top half of an fp32. Round to nearest even; NaN stays a (quiet) NaN.
inline uint16_t float_to_bf16(float f) {
  uint32_t u = float_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_float(uint16_t h) { return bits_to_float(static_cast<uint32_t>(h) << 16); }

// IEEE binary16, round to nearest even, with subnormals, overflow to inf and NaN.
inline uint16_t float_to_fp16(float f) {
  uint32_t x = float_to_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);          // NaN
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);         // rounds to inf
  if (absx < 0x38800000u) {                                                     // subnormal half
    // value = absx as float; half subnormal unit is 2^-24. Round value / 2^-24 to nearest even.
    float v = bits_to_float(absx) * 16777216.0f;  // exact: scaling by a power of two
    uint32_t q = static_cast<uint32_t>(v);
    float rem = v - static_cast<float>(q);
    if (rem > 0.5f || (rem == 0.5f && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t exp = (absx >> 23) - 127 + 15;
  uint32_t mant = absx & 0x7fffffu;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: correct
  return static_cast<uint16_t>(sign | h);
}
inline float fp16_to_float(uint16_t h) {
  uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_to_float(sign | 0x7f800000u | (mant << 13));
  return bits_to_float(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

// Round a float to the given storage type and back (identity for fp32).
inline float round_to(DType d, float f) {
  switch (d) {
    case DType::kFloat16: return fp16_to_float(float_to_fp16(f));
    case DType::kBFloat16: return bf16_to_float(float_to_bf16(f));
    default: return f;
  }
}

// Load / store one element of type `d` at `p` as float.
inline float load_as_float(DType d, const void* p) {
  switch (d) {
    case DType::kFloat16: return fp16_to_float(*static_cast<const uint16_t*>(p));
    case DType::kBFloat16: return bf16_to_float(*static_cast<const uint16_t*>(p));
    default: return *static_cast<const float*>(p);
  }
}
inline void store_from_float(DType d, void* p, float f) {
  switch (d) {
    case DType::kFloat16: *static_cast<uint16_t*>(p) = float_to_fp16(f); break;
    case DType::kBFloat16: *static_cast<uint16_t*>(p) = float_to_bf16(f); break;
    default: *static_cast<float*>(p) = f; break;
  }
}

}  // namespace flashlab
