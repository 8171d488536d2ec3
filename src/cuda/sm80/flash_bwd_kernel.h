// src/cuda/sm80/flash_bwd_kernel.h — the backward __global__s: wire the pieces, compute nothing.
//
// flash_bwd_kernel (one CTA = one key block of one query head; FlashAttention-2's outer loop):
//   tile   = BwdTileScheduler::tile()                   (key block n, head, sequence)
//   range  = QueryBlockRange(mask, tile, n)             query blocks with a row that sees key block n
//   load K(n), V(n) once; dK = dV = 0 in registers
//   for m in range:                                     Q(m + 1), dO(m + 1) load meanwhile (2 stages)
//     S = Q·Kᵀ, dP = dO·Vᵀ                              MainloopBwd::gemm_s_dp
//     P ∘ Z, dS = hook(S, dP, LSE, D)                   BwdScoreHook::p_and_ds (mask, softcap, dropout)
//     P ∘ Z, dS -> smem                                 (the transposed products read them as A)
//     dV += (P ∘ Z)ᵀ·dO;  dK += dSᵀ·Q                    MainloopBwd::gemm_dv / gemm_dk
//     dQ_accum[m] += dS·K                               fp32 atomics (not in deterministic mode;
//                                                       before dV, dK where the tile says dq_first)
//                                                       into query block m's dq_accum tile,
//                                                       in register order (epilogue_bwd.h)
//   store dK · scale, dV                                EpilogueDkv (direct, atomic or partial)
// Barriers per query block: (1) Q(m), dO(m) landed and every warp finished block m − 1 (its reads
// of P, dS, and of the stage the next load overwrites); (2) P and dS written; with one stage also
// (3) every warp done with Q(m), dO(m) before Q(m + 1) overwrites them.
//
// flash_bwd_dq_kernel (deterministic mode; one CTA = one query block of one head; the forward's
// loop order): for each key block n the query block sees, recompute S, dP, dS exactly as above and
// accumulate dQ += dS·K(n) in registers; no atomics, so every bit is fixed by the inputs. It repeats
// the products S and dP of the main kernel. Cost: 3 block products per visible (query block, key
// block) pair on top of the main kernel's 4 (S, dP, dV, dK), i.e. 7 instead of the atomic path's
// 5: about 1.4x the tensor-core work, plus a second pass over K and V.
#pragma once

#include <cute/tensor.hpp>

#include "cuda/sm80/bwd_mask.h"
#include "cuda/sm80/bwd_params.h"
#include "cuda/sm80/bwd_score.h"
#include "cuda/sm80/epilogue_bwd.h"
#include "cuda/sm80/fragments.h"
#include "cuda/sm80/mainloop_bwd.h"
#include "cuda/sm80/mask.h"
#include "cuda/sm80/tile_scheduler.h"

namespace flashlab {
namespace sm80 {

using namespace cute;

template <typename Traits, bool kDropout>
__global__ void __launch_bounds__(Traits::kNThreads, 1)
    flash_bwd_kernel(__grid_constant__ const BwdKernelParams params) {
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kBlockN = Traits::kBlockN;
  constexpr int kHeadDim = Traits::kHeadDim;
  constexpr int kStages = Traits::kStages;
  extern __shared__ __align__(128) char smem[];

  int n_block;
  FwdTile tile = BwdTileScheduler::tile(params.seq, &n_block);
  if (n_block * kBlockN >= tile.k_len) return;  // varlen: past this sequence's keys (CTA-uniform)

  typename Traits::TiledMmaSdP mma_sdp;
  auto thr_sdp = mma_sdp.get_thread_slice(threadIdx.x);
  Tensor acc_dk = partition_fragment_C(typename Traits::TiledMmadKV{},
                                       Shape<Int<kBlockN>, Int<kHeadDim>>{});  // ((2, 2), MMA_N, MMA_D) fp32
  Tensor acc_dv = partition_fragment_C(typename Traits::TiledMmadKV{},
                                       Shape<Int<kBlockN>, Int<kHeadDim>>{});  // ((2, 2), MMA_N, MMA_D) fp32
  clear(acc_dk);
  clear(acc_dv);
  Tensor cS = make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{});  // (BLK_M, BLK_N) -> (row, col)
  Tensor tScS = rowcol_view(thr_sdp.partition_C(cS));                     // (rows, cols) -> (row, col)

  const QueryBlockRange<kBlockM, kBlockN> range(params.score, tile, n_block);
  if (!range.empty()) {  // else no row sees these keys: dK = dV = 0 below
    const MainloopBwd<Traits> mainloop(params.in, params.rows, params.seq, tile, smem);
    const BwdScoreHook<kBlockM, kBlockN, Traits::kTile.masked_simple> hook(params.score, tile);
    const Dropout<kDropout> dropout(params.dropout, tile, params.seq.heads_q);
    const bool dq_atomic = params.grad.dq_accum != nullptr;

    mainloop.load_k(n_block);
    mainloop.load_v(n_block);
    mainloop.load_q(range.m_min, 0);
    mainloop.load_do(range.m_min, 0);
    cp_async_fence();
    for (int m_block = range.m_min; m_block < range.m_max; ++m_block) {
      const int stage = kStages == 2 ? (m_block - range.m_min) & 1 : 0;
      cp_async_wait<0>();
      __syncthreads();  // (1)
      if (kStages == 2 && m_block + 1 < range.m_max) {
        mainloop.load_q(m_block + 1, stage ^ 1);
        mainloop.load_do(m_block + 1, stage ^ 1);
        cp_async_fence();
      }

      Tensor acc_s =
          partition_fragment_C(mma_sdp, Shape<Int<kBlockM>, Int<kBlockN>>{});  // ((2, 2), MMA_M, MMA_N)
      Tensor acc_dp =
          partition_fragment_C(mma_sdp, Shape<Int<kBlockM>, Int<kBlockN>>{});  // ((2, 2), MMA_M, MMA_N)
      clear(acc_s);
      clear(acc_dp);
      float lse_log2[Traits::kRowsPerThread], dsum[Traits::kRowsPerThread];
      mainloop.load_row_stats(tScS, m_block, lse_log2, dsum);
      mainloop.gemm_s_dp(acc_s, acc_dp, stage);

      tile.m_block = m_block;
      const bool needs_mask = KeyBlockRange<kBlockM, kBlockN>(params.score, tile).needs_mask(n_block);
      Tensor s = rowcol_view(acc_s);    // (rows, cols)
      Tensor dp = rowcol_view(acc_dp);  // (rows, cols)
      hook.p_and_ds(s, dp, tScS, m_block, n_block, needs_mask, lse_log2, dsum, dropout);
      mainloop.store_p_ds(acc_s, acc_dp, /*store_p=*/true);
      __syncthreads();  // (2)

      // dQ before or after dV and dK (bwd_tile_size.h, dq_first: measured per head-dim bucket):
      // first, its reductions to global memory drain while dV and dK are computed.
      auto dq_product = [&]() __attribute__((always_inline)) {
        if (!dq_atomic) return;
        Tensor acc_dq = partition_fragment_C(typename Traits::TiledMmadQ{},
                                             Shape<Int<kBlockM>, Int<kHeadDim>>{});  // ((2, 2), MMA_M, MMA_D)
        clear(acc_dq);
        mainloop.gemm_dq(acc_dq);
        add_dq_atomic<Traits>(acc_dq, params.grad, tile, params.seq.seqlen_q, params.seq.heads_q, m_block);
      };
      if constexpr (Traits::kTile.dq_first) dq_product();
      mainloop.gemm_dv(acc_dv, stage);
      mainloop.gemm_dk(acc_dk, stage);
      if constexpr (!Traits::kTile.dq_first) dq_product();
      if (kStages == 1 && m_block + 1 < range.m_max) {
        __syncthreads();  // (3)
        mainloop.load_q(m_block + 1, 0);
        mainloop.load_do(m_block + 1, 0);
        cp_async_fence();
      }
    }
  }

  const EpilogueDkv<Traits> epilogue(params.grad, tile, n_block, params.in.head_dim);
  epilogue.store(acc_dk, acc_dv, params.score.softmax_scale, params.in.kv_group, params.seq.seqlen_k, smem);
}

template <typename Traits, bool kDropout>
__global__ void __launch_bounds__(Traits::kNThreads, 1)
    flash_bwd_dq_kernel(__grid_constant__ const BwdKernelParams params) {
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kBlockN = Traits::kBlockN;
  constexpr int kHeadDim = Traits::kHeadDim;
  extern __shared__ __align__(128) char smem[];

  const FwdTile tile = FwdTileScheduler::tile(params.seq);
  if (tile.m_block * kBlockM >= tile.q_len) return;  // varlen: past this sequence's end

  typename Traits::TiledMmaSdP mma_sdp;
  auto thr_sdp = mma_sdp.get_thread_slice(threadIdx.x);
  Tensor acc_dq = partition_fragment_C(typename Traits::TiledMmadQ{},
                                       Shape<Int<kBlockM>, Int<kHeadDim>>{});  // ((2, 2), MMA_M, MMA_D) fp32
  clear(acc_dq);
  Tensor cS = make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{});  // (BLK_M, BLK_N) -> (row, col)
  Tensor tScS = rowcol_view(thr_sdp.partition_C(cS));                     // (rows, cols) -> (row, col)

  const KeyBlockRange<kBlockM, kBlockN> range(params.score, tile);
  if (!range.empty()) {  // else no row sees a key: dQ = 0
    const MainloopBwd<Traits> mainloop(params.in, params.rows, params.seq, tile, smem);
    const BwdScoreHook<kBlockM, kBlockN, Traits::kTile.masked_simple> hook(params.score, tile);
    const Dropout<kDropout> dropout(params.dropout, tile, params.seq.heads_q);
    float lse_log2[Traits::kRowsPerThread], dsum[Traits::kRowsPerThread];
    mainloop.load_row_stats(tScS, tile.m_block, lse_log2, dsum);
    mainloop.load_q(tile.m_block, 0);
    mainloop.load_do(tile.m_block, 0);
    for (int n_block = range.n_min; n_block < range.n_max; ++n_block) {
      mainloop.load_k(n_block);
      mainloop.load_v(n_block);
      cp_async_fence();
      cp_async_wait<0>();
      __syncthreads();  // (1) K(n), V(n) (and Q, dO) landed

      Tensor acc_s =
          partition_fragment_C(mma_sdp, Shape<Int<kBlockM>, Int<kBlockN>>{});  // ((2, 2), MMA_M, MMA_N)
      Tensor acc_dp =
          partition_fragment_C(mma_sdp, Shape<Int<kBlockM>, Int<kBlockN>>{});  // ((2, 2), MMA_M, MMA_N)
      clear(acc_s);
      clear(acc_dp);
      mainloop.gemm_s_dp(acc_s, acc_dp, 0);
      Tensor s = rowcol_view(acc_s);    // (rows, cols)
      Tensor dp = rowcol_view(acc_dp);  // (rows, cols)
      hook.p_and_ds(s, dp, tScS, tile.m_block, n_block, range.needs_mask(n_block), lse_log2, dsum, dropout);
      mainloop.store_p_ds(acc_s, acc_dp, /*store_p=*/false);
      __syncthreads();  // (2) dS written

      mainloop.gemm_dq(acc_dq);
      __syncthreads();  // (3) every warp done with K(n), dS before they are overwritten
    }
  }
  store_dq<Traits>(acc_dq, params.grad, tile, params.score.softmax_scale, params.in.head_dim, smem);
}

// dQ = scale · dq_accum -> the dtype output, atomic mode (grid and tile as flash_bwd_dq_kernel's).
// The tile is read back into the accumulator fragment it was added from (epilogue_bwd.h), so the
// store is the deterministic kernel's (through shared memory, 16-byte stores).
template <typename Traits>
__global__ void __launch_bounds__(Traits::kNThreads)
    bwd_convert_dq_kernel(__grid_constant__ const BwdKernelParams params) {
  extern __shared__ __align__(128) char smem[];  // one (BLK_M, HDIM) tile, Traits::kSmemQdOBytes
  const FwdTile tile = FwdTileScheduler::tile(params.seq);
  if (tile.m_block * Traits::kBlockM >= tile.q_len) return;  // varlen: past this sequence's end
  Tensor acc_dq = partition_fragment_C(typename Traits::TiledMmadQ{},
                                       Shape<Int<Traits::kBlockM>, Int<Traits::kHeadDim>>{});  // ((2, 2), MMA_M, MMA_D)
  load_dq_accum<Traits>(acc_dq, params.grad, tile, params.seq.seqlen_q, params.seq.heads_q, tile.m_block);
  store_dq<Traits>(acc_dq, params.grad, tile, params.score.softmax_scale, params.in.head_dim, smem);
}

}  // namespace sm80
}  // namespace flashlab
