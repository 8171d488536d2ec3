// learn/kernels/scalar_tiles.cuh — the fp32 CUDA-core tile arithmetic shared by v1 and v2.
//
// v1 (FlashAttention-1) and v2 (FlashAttention-2) do the same arithmetic on a 64×64 tile of
// scores; what differs — the lesson — is the loop order and where O, l and m live between tiles.
// So the tile work lives here once, and forward_v1.cu / forward_v2.cu hold only the loops.
//
// Tiles: Br = 64 query rows × Bc = 64 keys, 256 threads as a 16×16 grid (ty, tx).
//   S tile: thread (ty, tx) owns rows ty*4 + r (r < 4) and keys tx + 16*c (c < 4)
//   O tile: thread (ty, tx) owns rows ty*4 + r and columns 64*g + tx*4 + c (g < D/64, c < 4)
// The 16 threads of one row group are 16 consecutive lanes of one warp, so row max / row sum
// are four __shfl_xor steps (8, 4, 2, 1).
//
// Shared memory (fp32: inputs are converted once when loaded, the inner loops are pure FFMA):
//   sQ [Br][D+4]  sK [Bc][D+4]  sV [Bc][D]  sP [Br][Bc+4]
// Why +4: a row of D+4 floats is an odd number of 16-byte units (D = 64: 17, D = 128: 33), so the
// float4 reads of rows tx, tx+16, ... by 8 consecutive lanes hit 8 different 16-byte bank groups.
#pragma once

#include "kernels/common.cuh"

namespace flashlab {
namespace learn {

template <int kD>
struct ScalarTile {
  static_assert(kD == 64 || kD == 128, "the learning kernels instantiate head_dim 64 and 128");
  static constexpr int kBr = 64, kBc = 64, kThreads = 256;
  static constexpr int kLd = kD + 4;    // sQ, sK row stride (floats)
  static constexpr int kLdP = kBc + 4;  // sP row stride
  static constexpr int kOCols = kD / 16;  // O columns per thread
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kBr * kLd;
  static constexpr int kV = kK + kBc * kLd;
  static constexpr int kP = kV + kBc * kD;
  static constexpr int kFloats = kP + kBr * kLdP;
  static constexpr size_t kSmemBytes = kFloats * sizeof(float);  // D = 128: 115 KiB; D = 64: 66 KiB
};

// Loads `rows` (< valid rows; the rest of the kRows are zero) of a (rows × D) bf16/fp16 tile with
// row stride `stride` elements into fp32 shared memory with row stride `ld`. 16-byte loads,
// consecutive threads take consecutive 16-byte chunks of a row (coalesced).
template <typename T, int kD, int kRows>
__device__ void load_tile_f32(float* dst, int ld, const T* src, int64_t stride, int valid) {
  constexpr int kChunks = kD / 8;  // 8 elements = 16 bytes per chunk
  for (int idx = threadIdx.x; idx < kRows * kChunks; idx += blockDim.x) {
    const int row = idx / kChunks, ch = idx % kChunks;
    float f[8];
    if (row < valid) {
      const uint4 raw = *reinterpret_cast<const uint4*>(src + row * stride + ch * 8);
      const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
      for (int t = 0; t < 8; ++t) f[t] = ElemTraits<T>::to_float(e[t]);
    } else {
#pragma unroll
      for (int t = 0; t < 8; ++t) f[t] = 0.0f;
    }
    float4* d = reinterpret_cast<float4*>(dst + row * ld + ch * 8);
    d[0] = make_float4(f[0], f[1], f[2], f[3]);
    d[1] = make_float4(f[4], f[5], f[6], f[7]);
  }
}

// acc[r][c] = Q[ty*4 + r] · K[tx + 16c] (raw dot products, unscaled).
template <int kD>
__device__ void tile_scores(const float* sQ, const float* sK, float (&acc)[4][4]) {
  using Tile = ScalarTile<kD>;
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[r][c] = 0.0f;
#pragma unroll 4
  for (int kk = 0; kk < kD; kk += 4) {
    float4 a[4], b[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) a[r] = *reinterpret_cast<const float4*>(sQ + (ty * 4 + r) * Tile::kLd + kk);
#pragma unroll
    for (int c = 0; c < 4; ++c) b[c] = *reinterpret_cast<const float4*>(sK + (tx + 16 * c) * Tile::kLd + kk);
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int c = 0; c < 4; ++c)
        acc[r][c] += a[r].x * b[c].x + a[r].y * b[c].y + a[r].z * b[c].z + a[r].w * b[c].w;
  }
}

// Writes this thread's P values into sP (row ty*4 + r, key tx + 16c).
template <int kD>
__device__ void store_p(float* sP, const float (&p)[4][4]) {
  using Tile = ScalarTile<kD>;
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int c = 0; c < 4; ++c) sP[(ty * 4 + r) * Tile::kLdP + tx + 16 * c] = p[r][c];
}

// o[r][4g + c] += sum_j P[ty*4 + r][j] * V[j][64g + tx*4 + c] over the Bc keys of the tile.
template <int kD>
__device__ void tile_pv(const float* sP, const float* sV, float (&o)[4][kD / 16]) {
  using Tile = ScalarTile<kD>;
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
#pragma unroll 2
  for (int j = 0; j < Tile::kBc; j += 4) {
    float4 p[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) p[r] = *reinterpret_cast<const float4*>(sP + (ty * 4 + r) * Tile::kLdP + j);
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
#pragma unroll
      for (int g = 0; g < kD / 64; ++g) {
        const float4 v = *reinterpret_cast<const float4*>(sV + (j + jj) * kD + 64 * g + tx * 4);
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const float pj = jj == 0 ? p[r].x : jj == 1 ? p[r].y : jj == 2 ? p[r].z : p[r].w;
          o[r][4 * g + 0] += pj * v.x;
          o[r][4 * g + 1] += pj * v.y;
          o[r][4 * g + 2] += pj * v.z;
          o[r][4 * g + 3] += pj * v.w;
        }
      }
    }
  }
}

// Max / sum over the 16 lanes that share a row group.
__device__ __forceinline__ float row_max16(float x) {
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float row_sum16(float x) {
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Scales the raw scores into the log2 domain (x * scale * log2 e) and masks keys a row may not
// see (beyond seqlen_k, or right of the causal diagonal) with -inf.
template <int kD>
__device__ void scale_and_mask(const FwdKernelParams& p, int i0, int j0, float (&s)[4][4]) {
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int hi = last_visible_key(p, i0 + ty * 4 + r);
#pragma unroll
    for (int c = 0; c < 4; ++c) s[r][c] = (j0 + tx + 16 * c <= hi) ? s[r][c] * p.scale_log2 : -INFINITY;
  }
}

// Writes 4 consecutive output elements (8 bytes) from fp32.
template <typename T>
__device__ __forceinline__ void store4(T* dst, float a, float b, float c, float d) {
  typename ElemTraits<T>::Pair lo = ElemTraits<T>::pack(a, b), hi = ElemTraits<T>::pack(c, d);
  uint2 raw;
  raw.x = *reinterpret_cast<uint32_t*>(&lo);
  raw.y = *reinterpret_cast<uint32_t*>(&hi);
  *reinterpret_cast<uint2*>(dst) = raw;
}

}  // namespace learn
}  // namespace flashlab
