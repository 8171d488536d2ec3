// learn/kernels/backward_v1.cu — version 1 of the backward pass: FlashAttention-1, Algorithm 2.
//
// What changes from v0: no O(seqlen²) matrix is ever stored. S, P, dP and dS exist only as one
// 32×32 tile in shared memory; P is recomputed from the forward's softmax statistics instead of
// being read back. The loop order is the paper's:
//
//   for each key block j:                      (outer, sequential inside one thread block)
//     load K_j, V_j; dK_j = dV_j = 0
//     for each query block i:                  (inner)
//       load Q_i, O_i, dO_i, dQ_i, stats_i
//       S = Q_i·K_jᵀ;  P = exp(c·S − LSE)      (the paper's diag(l)⁻¹·exp(S − m): LSE = m + log l)
//       dV_j += Pᵀ·dO_i;  dP = dO_i·V_jᵀ
//       D_i = rowsum(dO_i ∘ O_i)               (recomputed for every j: FA-1 keeps nothing per row)
//       dS = P∘(dP − D_i)
//       dQ_i += c·dS·K_j   → written back to HBM (read-modify-write, no atomics needed)
//       dK_j += c·dSᵀ·Q_i
//     write dK_j, dV_j
//
// Parallelism is the paper's too: one thread block per (batch, kv head), so only batch·heads_kv
// blocks run (64 for the standard 16k-token shape: half the H100 idles). That is why dQ needs no
// atomics here — every dQ_i of a head is updated by exactly one block, in order — and it is what
// FlashAttention-2 (v2) changes. dQ accumulates in an fp32 workspace (rounding 16-bit partial sums
// seqlen_k/32 times would lose precision); a last kernel scales and rounds it into dq.
//
// Run: build/learn/attention_backward 1
#include "kernels/backward_scalar_tile.cuh"

namespace flashlab {
namespace learn_bwd {
namespace {

using scalar::kBlock;
using scalar::kThreads;

template <typename T, int HD>
__global__ void __launch_bounds__(kThreads) bwd_v1_kernel(BwdArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<scalar::Smem<HD>*>(smem_raw);
  const int hk = blockIdx.x, b = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  for (int j0 = 0; j0 < a.seqlen_k; j0 += kBlock) {
    __syncthreads();  // the previous key block's last tile_dq still reads sm.k
    scalar::load_rows<T, HD>(sm.k, a.k, a.k_st, b, j0, hk, a.seqlen_k);
    scalar::load_rows<T, HD>(sm.v, a.v, a.v_st, b, j0, hk, a.seqlen_k);
    float dk[HD / 8] = {}, dv[HD / 8] = {};

    for (int g = 0; g < a.group; ++g) {  // GQA: every query head that reads this kv head
      const int h = hk * a.group + g;
      for (int i0 = 0; i0 < a.seqlen_q; i0 += kBlock) {
        __syncthreads();  // the previous tile is fully consumed
        scalar::load_rows<T, HD>(sm.q, a.q, a.q_st, b, i0, h, a.seqlen_q);
        scalar::load_rows<T, HD>(sm.dout, a.dout, a.do_st, b, i0, h, a.seqlen_q);
        // Row statistics: LSE from the forward, D recomputed from O_i and dO_i in HBM (warp per row).
        for (int r = warp; r < kBlock; r += kThreads / 32) {
          const int i = i0 + r;
          float d = 0.0f;
          if (i < a.seqlen_q) {
            const T* o = static_cast<const T*>(a.o) + elem_index(a.o_st, b, i, h);
            const T* dout = static_cast<const T*>(a.dout) + elem_index(a.do_st, b, i, h);
            for (int c = lane; c < HD; c += 32) d += to_float(o[c]) * to_float(dout[c]);
          }
          for (int off = 16; off > 0; off /= 2) d += __shfl_xor_sync(0xffffffffu, d, off);
          if (lane == 0) {
            const float lse = i < a.seqlen_q ? a.lse[b * a.lse_batch_stride + h * a.lse_head_stride + i] : -INFINITY;
            sm.lse2[r] = lse == -INFINITY ? INFINITY : lse * kLog2e;  // no visible key: P = 0
            sm.d[r] = d;
          }
        }
        __syncthreads();
        scalar::tile_p_ds(sm, a, i0, j0);
        __syncthreads();
        scalar::tile_dkdv<HD>(sm, dk, dv);
        float dq[HD / 8];
        scalar::tile_dq<HD>(sm, dq);
        const int i = i0 + threadIdx.x / 8;
        if (i < a.seqlen_q) {  // dQ_i += dS·K_j, read-modify-write: this block is dQ_i's only writer
          float* acc = a.dq_acc + dq_acc_index(a, b, h, i);
#pragma unroll
          for (int n = 0; n < HD / 8; ++n) acc[threadIdx.x % 8 + 8 * n] += dq[n];
        }
      }
    }
    scalar::store_dkdv<T, HD>(a, b, hk, j0, dk, dv);
  }
}

template <typename T, int HD>
Status launch(const BwdArgs& a, cudaStream_t stream) {
  return learn::launch_with_smem(bwd_v1_kernel<T, HD>, dim3(a.heads_kv, a.batch), kThreads,
                                 sizeof(scalar::Smem<HD>), stream, a);
}

}  // namespace

// Only dq_acc is zeroed before the kernel: v1 computes D itself (no preprocessing).
Status backward_v1(const BwdParams& p) {
  const int turn_block_m = 0;  // no dQ turns: each dQ_i has one writer
  return run_with_workspace(p, turn_block_m, Prologue::kZeroDqAcc, [](const BwdArgs& a, cudaStream_t s) {
    return LEARN_DTYPE_SWITCH(a.dtype, T, [&] {
      return LEARN_HDIM_SWITCH(a.head_dim, kHeadDim, [&] { return launch<T, kHeadDim>(a, s); });
    });
  });
}

}  // namespace learn_bwd
}  // namespace flashlab
