// learn/kernels/forward_v2.cu — v2: FlashAttention-2 loop order (scalar fp32 on CUDA cores).
//
// Changes over v1: the loops swap. One thread block owns one Q tile (64 rows) for its whole life
// and streams every K/V tile past it:
//
//   load Q_i                                  (once)
//   m = -inf, l = 0, O = 0                    (registers)
//   for each K/V tile j:
//     S = Q_i · K_jᵀ · scale                  (log2 domain: exp(x) = exp2(x·log2 e))
//     m_new = max(m, rowmax(S));  α = exp2(m − m_new)
//     P = exp2(S − m_new);  l = α·l + rowsum(P);  O = α·O + P·V_j;  m = m_new
//   O = O / l;  LSE = (m + log2 l)·ln 2       (written once)
//
// What it buys: O, l and m never leave registers (v1 read and wrote them for every K/V tile), Q
// is read once, the division by l happens once at the end instead of per tile, and the grid has
// one block per (Q tile, head, batch) instead of per (head, batch), so short batches of long
// sequences still fill all 132 SMs. Still fp32 FFMA only: v3 moves the two products to tensor cores.
#include <cmath>

#include "kernels/common.cuh"
#include "kernels/forward.h"
#include "kernels/scalar_tiles.cuh"

namespace flashlab {
namespace learn {

namespace {

template <typename T, int kD>
__global__ void __launch_bounds__(ScalarTile<kD>::kThreads) fa2_scalar_kernel(FwdKernelParams p) {
  using Tile = ScalarTile<kD>;
  extern __shared__ float smem[];
  float* sQ = smem + Tile::kQ;
  float* sK = smem + Tile::kK;
  float* sV = smem + Tile::kV;
  float* sP = smem + Tile::kP;
  const int i0 = blockIdx.x * Tile::kBr, h = blockIdx.y, b = blockIdx.z, hk = h / p.kv_group;
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;

  const T* q = static_cast<const T*>(p.q) + b * p.q_batch_stride + int64_t(i0) * p.q_row_stride + h * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + b * p.k_batch_stride + hk * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + b * p.v_batch_stride + hk * p.v_head_stride;
  load_tile_f32<T, kD, Tile::kBr>(sQ, Tile::kLd, q, p.q_row_stride, min(Tile::kBr, p.seqlen_q - i0));

  float m[4], l[4], o[4][Tile::kOCols];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < Tile::kOCols; ++c) o[r][c] = 0.0f;
  }

  for (int j0 = 0; j0 < p.seqlen_k; j0 += Tile::kBc) {
    __syncthreads();  // the previous tile's P·V is done with sK, sV, sP
    const int valid = min(Tile::kBc, p.seqlen_k - j0);
    load_tile_f32<T, kD, Tile::kBc>(sK, Tile::kLd, k + int64_t(j0) * p.k_row_stride, p.k_row_stride, valid);
    load_tile_f32<T, kD, Tile::kBc>(sV, kD, v + int64_t(j0) * p.v_row_stride, p.v_row_stride, valid);
    __syncthreads();

    float s[4][4];
    tile_scores<kD>(sQ, sK, s);
    scale_and_mask<kD>(p, i0, j0, s);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const float m_new = fmaxf(m[r], row_max16(fmaxf(fmaxf(s[r][0], s[r][1]), fmaxf(s[r][2], s[r][3]))));
      // A row with every key masked so far has m_new = -inf; subtracting 0 instead keeps
      // exp2(-inf - (-inf)) = NaN out (every P is exp2(-inf) = 0 then).
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;
      const float alpha = exp2f(m[r] - m_use);
      float sum = 0.0f;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        s[r][c] = exp2f(s[r][c] - m_use);
        sum += s[r][c];
      }
      l[r] = alpha * l[r] + sum;  // this thread's partial row sum; the 16 lanes are added at the end
#pragma unroll
      for (int c = 0; c < Tile::kOCols; ++c) o[r][c] *= alpha;
      m[r] = m_new;
    }
    store_p<kD>(sP, s);
    __syncthreads();
    tile_pv<kD>(sP, sV, o);
  }

  // Epilogue: normalize once, write O and LSE once.
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int i = i0 + ty * 4 + r;
    const float l_row = row_sum16(l[r]);
    if (i >= p.seqlen_q) continue;
    const float inv = l_row > 0.0f ? 1.0f / l_row : 0.0f;  // no visible key: O = 0
    T* out = out_row<T>(p, b, i, h);
#pragma unroll
    for (int g = 0; g < kD / 64; ++g)
      store4<T>(out + 64 * g + tx * 4, o[r][4 * g] * inv, o[r][4 * g + 1] * inv, o[r][4 * g + 2] * inv,
                o[r][4 * g + 3] * inv);
    if (tx == 0 && p.lse)
      p.lse[lse_index(p, b, h, i)] = l_row > 0.0f ? (m[r] + log2f(l_row)) * kLn2 : -INFINITY;
  }
}

template <typename T, int kD>
Status launch(const FwdParams& fp) {
  using Tile = ScalarTile<kD>;
  const FwdKernelParams p = make_fwd_kernel_params(fp);
  const dim3 grid(ceil_div(p.seqlen_q, Tile::kBr), p.heads_q, p.batch);
  return launch_with_smem(fa2_scalar_kernel<T, kD>, grid, Tile::kThreads, Tile::kSmemBytes,
                          static_cast<cudaStream_t>(fp.stream), p);
}

}  // namespace

Status forward_v2(const FwdParams& p) {
  return LEARN_DTYPE_SWITCH(p.dtype, T, [&] {
    return LEARN_HDIM_SWITCH(p.head_dim, kD, [&] { return launch<T, kD>(p); });
  });
}

}  // namespace learn
}  // namespace flashlab
