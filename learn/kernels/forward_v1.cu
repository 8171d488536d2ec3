// learn/kernels/forward_v1.cu — v1: FlashAttention-1 (Dao et al. 2022, Algorithm 1), scalar fp32.
//
// Changes over v0: S and P are never written to device memory. Scores are computed one 64×64
// tile at a time in shared memory and folded into the output with the online-softmax update, so
// the extra memory drops from O(seqlen_q·seqlen_k) to O(seqlen_q) (l and m) plus an fp32 copy
// of O (which v2 removes too).
//
// Loop order, exactly as Algorithm 1 (one thread block per (head, batch)):
//   for each K/V tile j:                     (outer)
//     load K_j, V_j into shared memory
//     for each Q tile i:                     (inner)
//       load Q_i, and O_i, l_i, m_i from device memory
//       S = Q_i·K_jᵀ·scale;  m~ = rowmax(S);  P~ = exp(S − m~);  l~ = rowsum(P~)
//       m_new = max(m_i, m~);  l_new = e^(m_i − m_new)·l_i + e^(m~ − m_new)·l~
//       O_i = (l_i·e^(m_i − m_new)·O_i + e^(m~ − m_new)·P~·V_j) / l_new
//       write O_i, l_new, m_new back to device memory
//
// The costs v2 removes: O_i, l_i and m_i make a round trip through device memory for every
// (i, j) pair, Q is re-read once per K/V tile, O is divided by l every step, and the grid has only
// batch × heads blocks — 16 blocks on a 132-SM GPU at batch 1, 16 heads.
#include <cmath>

#include "kernels/common.cuh"
#include "kernels/forward.h"
#include "kernels/scalar_tiles.cuh"

namespace flashlab {
namespace learn {

namespace {

// The state Algorithm 1 keeps in device memory between tiles, per (batch, head):
//   O_acc [seqlen_q][D] fp32, and ml [seqlen_q] float2 = (m in the log2 domain, l).
template <typename T, int kD>
__global__ void __launch_bounds__(ScalarTile<kD>::kThreads)
    fa1_scalar_kernel(FwdKernelParams p, float* o_acc, float2* ml) {
  using Tile = ScalarTile<kD>;
  extern __shared__ float smem[];
  float* sQ = smem + Tile::kQ;
  float* sK = smem + Tile::kK;
  float* sV = smem + Tile::kV;
  float* sP = smem + Tile::kP;
  const int h = blockIdx.x, b = blockIdx.y, hk = h / p.kv_group;
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  const int64_t bh = int64_t(b) * p.heads_q + h;
  o_acc += bh * p.seqlen_q * kD;
  ml += bh * p.seqlen_q;

  const T* q = static_cast<const T*>(p.q) + b * p.q_batch_stride + h * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + b * p.k_batch_stride + hk * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + b * p.v_batch_stride + hk * p.v_head_stride;

  for (int j0 = 0; j0 < p.seqlen_k; j0 += Tile::kBc) {
    const bool first = j0 == 0, last = j0 + Tile::kBc >= p.seqlen_k;
    __syncthreads();  // the last inner iteration is done with sK, sV
    const int valid_k = min(Tile::kBc, p.seqlen_k - j0);
    load_tile_f32<T, kD, Tile::kBc>(sK, Tile::kLd, k + int64_t(j0) * p.k_row_stride, p.k_row_stride, valid_k);
    load_tile_f32<T, kD, Tile::kBc>(sV, kD, v + int64_t(j0) * p.v_row_stride, p.v_row_stride, valid_k);

    for (int i0 = 0; i0 < p.seqlen_q; i0 += Tile::kBr) {
      __syncthreads();  // previous inner iteration is done with sQ, sP; the tiles above are loaded
      load_tile_f32<T, kD, Tile::kBr>(sQ, Tile::kLd, q + int64_t(i0) * p.q_row_stride, p.q_row_stride,
                                      min(Tile::kBr, p.seqlen_q - i0));
      __syncthreads();

      float s[4][4];
      tile_scores<kD>(sQ, sK, s);
      scale_and_mask<kD>(p, i0, j0, s);
      float m_old[4], l_old[4], alpha[4], beta[4], l_new[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int i = i0 + ty * 4 + r;  // rows past seqlen_q compute on zero Q rows, never stored
        const float2 st = (first || i >= p.seqlen_q) ? make_float2(-INFINITY, 0.0f) : ml[i];
        m_old[r] = st.x;
        l_old[r] = st.y;
        const float m_tile = row_max16(fmaxf(fmaxf(s[r][0], s[r][1]), fmaxf(s[r][2], s[r][3])));
        const float m_use = m_tile == -INFINITY ? 0.0f : m_tile;  // fully masked tile: P~ = 0
        float sum = 0.0f;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          s[r][c] = exp2f(s[r][c] - m_use);
          sum += s[r][c];
        }
        const float l_tile = row_sum16(sum);
        const float m_new = fmaxf(m_old[r], m_tile);
        const float m_new_use = m_new == -INFINITY ? 0.0f : m_new;
        alpha[r] = exp2f(m_old[r] - m_new_use);  // e^(m_i − m_new); 0 while m_i = -inf
        beta[r] = exp2f(m_tile - m_new_use);     // e^(m~ − m_new)
        l_new[r] = alpha[r] * l_old[r] + beta[r] * l_tile;
        m_old[r] = m_new;  // from here on: the new m
      }
      store_p<kD>(sP, s);
      __syncthreads();

      float pv[4][Tile::kOCols];
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < Tile::kOCols; ++c) pv[r][c] = 0.0f;
      tile_pv<kD>(sP, sV, pv);

#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int i = i0 + ty * 4 + r;
        if (i >= p.seqlen_q) continue;
        float* oi = o_acc + int64_t(i) * kD;
        const float inv = l_new[r] > 0.0f ? 1.0f / l_new[r] : 0.0f;
        float res[Tile::kOCols];
#pragma unroll
        for (int g = 0; g < kD / 64; ++g) {
          const float4 prev = first ? make_float4(0.f, 0.f, 0.f, 0.f)
                                    : *reinterpret_cast<const float4*>(oi + 64 * g + tx * 4);
          const float a = l_old[r] * alpha[r];
          res[4 * g + 0] = (a * prev.x + beta[r] * pv[r][4 * g + 0]) * inv;
          res[4 * g + 1] = (a * prev.y + beta[r] * pv[r][4 * g + 1]) * inv;
          res[4 * g + 2] = (a * prev.z + beta[r] * pv[r][4 * g + 2]) * inv;
          res[4 * g + 3] = (a * prev.w + beta[r] * pv[r][4 * g + 3]) * inv;
        }
        if (!last) {
#pragma unroll
          for (int g = 0; g < kD / 64; ++g)
            *reinterpret_cast<float4*>(oi + 64 * g + tx * 4) =
                make_float4(res[4 * g], res[4 * g + 1], res[4 * g + 2], res[4 * g + 3]);
          if (tx == 0) ml[i] = make_float2(m_old[r], l_new[r]);
        } else {  // the last K/V tile: O is final, write it in the element type, and the LSE
          T* out = out_row<T>(p, b, i, h);
#pragma unroll
          for (int g = 0; g < kD / 64; ++g)
            store4<T>(out + 64 * g + tx * 4, res[4 * g], res[4 * g + 1], res[4 * g + 2], res[4 * g + 3]);
          if (tx == 0 && p.lse)
            p.lse[lse_index(p, b, h, i)] = l_new[r] > 0.0f ? (m_old[r] + log2f(l_new[r])) * kLn2 : -INFINITY;
        }
      }
    }
  }
}

template <typename T, int kD>
Status launch(const FwdParams& fp) {
  using Tile = ScalarTile<kD>;
  const FwdKernelParams p = make_fwd_kernel_params(fp);
  cudaStream_t stream = static_cast<cudaStream_t>(fp.stream);
  const int64_t rows = int64_t(p.batch) * p.heads_q * p.seqlen_q;
  float* o_acc = nullptr;
  float2* ml = nullptr;
  if (cudaMallocAsync(reinterpret_cast<void**>(&o_acc), rows * kD * sizeof(float), stream) != cudaSuccess ||
      cudaMallocAsync(reinterpret_cast<void**>(&ml), rows * sizeof(float2), stream) != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it
    if (o_acc) cudaFreeAsync(o_acc, stream);
    return Status(StatusCode::kOutOfMemory, "learn_v1: no device memory for the O, l, m state");
  }
  const Status st = launch_with_smem(fa1_scalar_kernel<T, kD>, dim3(p.heads_q, p.batch), Tile::kThreads,
                                     Tile::kSmemBytes, stream, p, o_acc, ml);
  cudaFreeAsync(ml, stream);
  cudaFreeAsync(o_acc, stream);
  FLASHLAB_RETURN_IF_ERROR(st);
  LEARN_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

}  // namespace

Status forward_v1(const FwdParams& p) {
  return LEARN_DTYPE_SWITCH(p.dtype, T, [&] {
    return LEARN_HDIM_SWITCH(p.head_dim, kD, [&] { return launch<T, kD>(p); });
  });
}

}  // namespace learn
}  // namespace flashlab
