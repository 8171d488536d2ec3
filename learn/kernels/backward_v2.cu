// learn/kernels/backward_v2.cu — version 2 of the backward pass: FlashAttention-2 work partition.
//
// Same tile arithmetic as v1 (backward_scalar_tile.cuh, fp32 on CUDA cores). What changes:
//
//  1. Parallelism over the key sequence: one thread block per (key block j, kv head, batch) instead
//     of per (kv head, batch). 16k tokens × 16 heads now gives 8,192 blocks instead of 64, and the
//     loop over j disappears from the kernel. Each block owns dK_j and dV_j outright (registers).
//  2. D = rowsum(dO ∘ O) is computed once per query row by a preprocessing kernel, together with
//     LSE·log2e, instead of once per (row, key block): O is never read by the main kernel.
//  3. dQ_i now receives contributions from many blocks at the same time, so the read-modify-write
//     of v1 would race. Two ways out:
//       - atomics (default): atomicAdd into an fp32 dQ accumulator. Cheap, but fp32 addition is not
//         associative and the arrival order changes from run to run: dQ differs in the last bits.
//       - deterministic (BwdParams::deterministic): key block n waits until blocks 0..n-1 have
//         added their part of dQ_i (a counter per query block, backward_common.cuh), then adds.
//         Same order every run, bit-identical results, at the price of some waiting.
//     A third way, one extra kernel that recomputes S and dP per query block to produce dQ (no
//     atomics, ~1.4x the work), is left as an exercise in docs/learn.
//  4. The row statistic is the LSE itself (one float per row instead of the paper's m and l).
//
// Run: build/learn/attention_backward 2
#include "kernels/backward_scalar_tile.cuh"

namespace flashlab {
namespace learn_bwd {
namespace {

using scalar::kBlock;
using scalar::kThreads;

template <typename T, int HD>
__global__ void __launch_bounds__(kThreads) bwd_v2_kernel(BwdArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<scalar::Smem<HD>*>(smem_raw);
  const int n = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int j0 = n * kBlock;
  const int q_blocks = (a.seqlen_q + kBlock - 1) / kBlock;

  scalar::load_rows<T, HD>(sm.k, a.k, a.k_st, b, j0, hk, a.seqlen_k);
  scalar::load_rows<T, HD>(sm.v, a.v, a.v_st, b, j0, hk, a.seqlen_k);
  float dk[HD / 8] = {}, dv[HD / 8] = {};

  for (int g = 0; g < a.group; ++g) {
    const int h = hk * a.group + g;
    for (int m = 0; m < q_blocks; ++m) {  // every query block: causal blocks are masked, not skipped
      const int i0 = m * kBlock;
      __syncthreads();  // the previous tile is fully consumed
      scalar::load_rows<T, HD>(sm.q, a.q, a.q_st, b, i0, h, a.seqlen_q);
      scalar::load_rows<T, HD>(sm.dout, a.dout, a.do_st, b, i0, h, a.seqlen_q);
      load_row_stats<kBlock>(sm.lse2, sm.d, a, b, h, i0);
      __syncthreads();
      scalar::tile_p_ds(sm, a, i0, j0);
      __syncthreads();
      scalar::tile_dkdv<HD>(sm, dk, dv);
      float dq[HD / 8];
      scalar::tile_dq<HD>(sm, dq);

      int* turn = dq_turn_slot(a, b, h, q_blocks, m);
      dq_turn_wait(turn, n);
      const int i = i0 + threadIdx.x / 8;
      if (i < a.seqlen_q) {
        float* acc = a.dq_acc + dq_acc_index(a, b, h, i);
#pragma unroll
        for (int c = 0; c < HD / 8; ++c) atomicAdd(acc + threadIdx.x % 8 + 8 * c, dq[c]);
      }
      dq_turn_pass(turn, n);
    }
  }
  scalar::store_dkdv<T, HD>(a, b, hk, j0, dk, dv);
}

template <typename T, int HD>
Status launch(const BwdArgs& a, cudaStream_t stream) {
  const dim3 grid((a.seqlen_k + kBlock - 1) / kBlock, a.heads_kv, a.batch);
  return learn::launch_with_smem(bwd_v2_kernel<T, HD>, grid, kThreads, sizeof(scalar::Smem<HD>), stream, a);
}

}  // namespace

// D and lse2 precomputed once per row (launch_preprocess); dQ turns per 32-row query block.
Status backward_v2(const BwdParams& p) {
  const int turn_block_m = p.deterministic ? kBlock : 0;
  return run_with_workspace(p, turn_block_m, Prologue::kPreprocess, [](const BwdArgs& a, cudaStream_t s) {
    return LEARN_DTYPE_SWITCH(a.dtype, T, [&] {
      return LEARN_HDIM_SWITCH(a.head_dim, kHeadDim, [&] { return launch<T, kHeadDim>(a, s); });
    });
  });
}

}  // namespace learn_bwd
}  // namespace flashlab
