// learn/kernels/backward_scalar_tile.cuh — the per-tile math of the scalar backward versions (v1, v2).
//
// v1 (FlashAttention-1, Algorithm 2) and v2 (FlashAttention-2) do exactly the same arithmetic on a
// (32 queries × 32 keys) tile; they differ in the loops around it, which is the lesson. So the tile
// math lives here once, in fp32 on CUDA cores, with tiles in shared memory:
//
//   tile_p_ds   : S = Q_i·K_jᵀ, P = exp2(S·c·log2e − lse2), dP = dO_i·V_jᵀ, dS = P∘(dP − D)
//   tile_dkdv   : dV_j += P ᵀ·dO_i,  dK_j += dSᵀ·Q_i      (accumulators in registers)
//   tile_dq     : dQ_i  = dS·K_j                            (the caller decides where it goes)
//
// Thread mappings (256 threads): in tile_p_ds thread t owns row t/8 and the 4 columns t%8 + 8m;
// in tile_dkdv / tile_dq it owns one row (t/8) and the head_dim/8 columns t%8 + 8n. Rows are padded
// by one float so the 4..8 different rows a warp touches fall in different banks.
#pragma once

#include "kernels/backward_common.cuh"

namespace flashlab {
namespace learn_bwd {
namespace scalar {

constexpr int kBlock = 32;     // query rows and key rows per tile
constexpr int kThreads = 256;  // 8 threads per tile row

template <int HD>
struct Smem {
  float q[kBlock][HD + 1];    // Q_i
  float dout[kBlock][HD + 1]; // dO_i
  float k[kBlock][HD + 1];    // K_j
  float v[kBlock][HD + 1];    // V_j
  float p[kBlock][kBlock + 1];
  float ds[kBlock][kBlock + 1];
  float lse2[kBlock];  // LSE·log2e of the tile's query rows (+inf: row sees nothing / padding)
  float d[kBlock];     // D = rowsum(dO ∘ O)
};

// Rows [row0, row0 + 32) of one head of a (batch, seqlen, heads, head_dim) tensor, as fp32.
// Rows past `rows` are zero: garbage there could be NaN, and NaN·0 is NaN.
template <typename T, int HD>
__device__ void load_rows(float (*dst)[HD + 1], const void* base, const Strides& st, int b, int row0,
                          int h, int rows) {
  const T* src = static_cast<const T*>(base);
  for (int e = threadIdx.x; e < kBlock * HD; e += kThreads) {
    const int r = e / HD, c = e % HD;
    dst[r][c] = row0 + r < rows ? to_float(src[elem_index(st, b, row0 + r, h) + c]) : 0.0f;
  }
}

template <int HD>
__device__ void tile_p_ds(Smem<HD>& sm, const BwdArgs& a, int i0, int j0) {
  const int i = threadIdx.x / 8;
  float s[4] = {}, dp[4] = {};
  for (int kk = 0; kk < HD; ++kk) {
    const float qv = sm.q[i][kk], ov = sm.dout[i][kk];
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const int j = threadIdx.x % 8 + 8 * m;
      s[m] += qv * sm.k[j][kk];
      dp[m] += ov * sm.v[j][kk];
    }
  }
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const int j = threadIdx.x % 8 + 8 * m;
    const bool keep = i0 + i < a.seqlen_q && j0 + j < a.seqlen_k && visible(a, i0 + i, j0 + j);
    const float p = keep ? exp2f(s[m] * a.scale_log2 - sm.lse2[i]) : 0.0f;
    sm.p[i][j] = p;
    sm.ds[i][j] = p * (dp[m] - sm.d[i]);
  }
}

template <int HD>
__device__ void tile_dkdv(const Smem<HD>& sm, float (&dk)[HD / 8], float (&dv)[HD / 8]) {
  const int j = threadIdx.x / 8;
  for (int i = 0; i < kBlock; ++i) {
    const float p = sm.p[i][j], ds = sm.ds[i][j];
#pragma unroll
    for (int n = 0; n < HD / 8; ++n) {
      const int c = threadIdx.x % 8 + 8 * n;
      dv[n] += p * sm.dout[i][c];
      dk[n] += ds * sm.q[i][c];
    }
  }
}

template <int HD>
__device__ void tile_dq(const Smem<HD>& sm, float (&dq)[HD / 8]) {
  const int i = threadIdx.x / 8;
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) dq[n] = 0.0f;
  for (int j = 0; j < kBlock; ++j) {
    const float ds = sm.ds[i][j];
#pragma unroll
    for (int n = 0; n < HD / 8; ++n) dq[n] += ds * sm.k[j][threadIdx.x % 8 + 8 * n];
  }
}

// dK_j (times the softmax scale) and dV_j from the registers of tile_dkdv to global memory.
template <typename T, int HD>
__device__ void store_dkdv(const BwdArgs& a, int b, int hk, int j0, const float (&dk)[HD / 8],
                           const float (&dv)[HD / 8]) {
  const int j = j0 + threadIdx.x / 8;
  if (j >= a.seqlen_k) return;
  T* dkp = static_cast<T*>(a.dk) + elem_index(a.dk_st, b, j, hk);
  T* dvp = static_cast<T*>(a.dv) + elem_index(a.dv_st, b, j, hk);
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) {
    const int c = threadIdx.x % 8 + 8 * n;
    dkp[c] = from_float<T>(a.scale * dk[n]);
    dvp[c] = from_float<T>(dv[n]);
  }
}

}  // namespace scalar
}  // namespace learn_bwd
}  // namespace flashlab
