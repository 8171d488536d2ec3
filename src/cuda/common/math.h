// src/cuda/common/math.h — the few arithmetic helpers every attention kernel shares.
//
// quad_max / quad_sum: the MMA accumulators of sm80 (mma.sync m16n8) and of sm90 (wgmma) both give
// each row of a tile to the four threads of a quad (lanes 4g .. 4g + 3), so a row reduction is two
// butterfly shuffles on either architecture.
#pragma once

namespace flashlab {
namespace common {

constexpr float kLog2e = 1.4426950408889634f;

// 2^x with one MUFU.EX2 (relative error ~2^-22; ex2(-inf) = +0, which the masked scores rely on).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 2);
  return x + __shfl_xor_sync(0xffffffffu, x, 1);
}

}  // namespace common
}  // namespace flashlab
