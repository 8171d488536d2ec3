// src/cuda/sm80/flash_bwd_kernel.h — the backward kernels: wire their pieces, compute nothing.
//
// Like the forward (flash_fwd_kernel.h), each kernel is a struct templated on its pieces —
// Mainloop (MainloopBwd), Epilogue (EpilogueDkv), TileScheduler, Variant (common::ScoreVariant),
// Dropout — with a Params of the pieces' Params, to_params(BwdArguments), a SharedStorage, and
// operator() run by device_kernel<Kernel>. The pre- and post-kernels (D = rowsum(dO ∘ O), the GQA
// dK/dV conversion) are architecture-neutral: common/bwd_prepost.h.
//
// FlashBwdKernel (one CTA = one key block of one query head; FlashAttention-2's outer loop):
//   tile   = TileScheduler::get_tile()                  (key block n, head, sequence)
//   range  = QueryBlockRange(mask, tile, n)             query blocks with a row that sees key block n
//   load K(n), V(n) once; dK = dV = 0 in registers
//   for m in range:                                     Q(m + 1), dO(m + 1) load meanwhile (2 stages)
//     S = Q·Kᵀ, dP = dO·Vᵀ                              Mainloop::gemm_s_dp
//     P ∘ Z, dS = variant(S, dP, LSE, D)                Variant::p_and_ds (mask, softcap, dropout)
//     P ∘ Z, dS -> smem                                 (the transposed products read them as A)
//     dV += (P ∘ Z)ᵀ·dO;  dK += dSᵀ·Q                    Mainloop::gemm_dv / gemm_dk
//     dQ_accum[m] += dS·K                               fp32 atomics (not in deterministic mode;
//                                                       before dV, dK where the tile says dq_first)
//                                                       into query block m's dq_accum tile,
//                                                       in register order (epilogue_bwd.h)
//   store dK · scale, dV                                Epilogue (direct, atomic or partial)
// Barriers per query block: (1) Q(m), dO(m) landed and every warp finished block m − 1 (its reads
// of P, dS, and of the stage the next load overwrites); (2) P and dS written; with one stage also
// (3) every warp done with Q(m), dO(m) before Q(m + 1) overwrites them.
//
// FlashBwdDqKernel (deterministic mode; one CTA = one query block of one head; the forward's
// loop order): for each key block n the query block sees, recompute S, dP, dS exactly as above and
// accumulate dQ += dS·K(n) in registers; no atomics, so every bit is fixed by the inputs. It repeats
// the products S and dP of the main kernel. Cost: 3 block products per visible (query block, key
// block) pair on top of the main kernel's 4 (S, dP, dV, dK), i.e. 7 instead of the atomic path's
// 5: about 1.4x the tensor-core work, plus a second pass over K and V.
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>

#include "cuda/common/block_range.h"
#include "cuda/common/kernel_args.h"
#include "cuda/common/tile_scheduler.h"
#include "cuda/sm80/epilogue_bwd.h"
#include "cuda/sm80/fragments.h"
#include "cuda/sm80/kernel_pieces.h"

namespace flashlab {
namespace sm80 {

using namespace cute;

// What the three sm80 backward kernels share: their pieces, Params and shared memory.
template <typename Mainloop_, typename Epilogue_, typename TileScheduler_, typename Variant_,
          typename Dropout_>
struct BwdKernelBase : KernelPieces<Mainloop_, Epilogue_, TileScheduler_, Variant_, Dropout_> {
  using Base = KernelPieces<Mainloop_, Epilogue_, TileScheduler_, Variant_, Dropout_>;
  using typename Base::Dropout;
  using typename Base::Epilogue;
  using typename Base::Mainloop;
  using typename Base::Params;
  using typename Base::TileScheduler;
  using typename Base::Variant;

  static Params to_params(const common::BwdArguments& a) {
    return Params{TileScheduler::to_params(a.seq), Mainloop::to_params({a.in, a.rows, a.seq.seqlen_q}),
                  Variant::to_params(a.score), Dropout::to_params(a.dropout), Epilogue::to_params(a.grad)};
  }
  struct SharedStorage {
    typename Mainloop::SharedStorage mainloop;
  };
  static constexpr int kSharedStorageBytes = int(sizeof(SharedStorage));
};

// One CTA = one key block of one query head: dK, dV, and (atomic mode) dQ contributions.
template <typename Mainloop, typename Epilogue, typename TileScheduler, typename Variant, typename Dropout>
struct FlashBwdKernel : BwdKernelBase<Mainloop, Epilogue, TileScheduler, Variant, Dropout> {
  using Base = BwdKernelBase<Mainloop, Epilogue, TileScheduler, Variant, Dropout>;
  using Base::kBlockM;
  using Base::kBlockN;
  using Base::kHeadDim;
  using typename Base::Params;
  using typename Base::SharedStorage;
  using typename Base::Traits;

  static dim3 grid(const Params& params) { return TileScheduler::grid(params.scheduler, kBlockN); }

  __device__ void operator()(const Params& params, SharedStorage& smem) const {
    constexpr int kStages = Traits::kStages;
    int n_block;
    WorkTile tile = Variant::kSinks ? TileScheduler::get_tile_low_keys_first(params.scheduler, &n_block)
                                    : TileScheduler::get_tile(params.scheduler, &n_block);
    if (n_block * kBlockN >= tile.k_len) return;  // varlen: past this sequence's keys (CTA-uniform)

    typename Traits::TiledMmaSdP mma_sdp;
    auto thr_sdp = mma_sdp.get_thread_slice(threadIdx.x);
    Tensor acc_dk = partition_fragment_C(
        typename Traits::TiledMmadKV{}, Shape<Int<kBlockN>, Int<kHeadDim>>{});  // ((2, 2), MMA_N, MMA_D) fp32
    Tensor acc_dv = partition_fragment_C(
        typename Traits::TiledMmadKV{}, Shape<Int<kBlockN>, Int<kHeadDim>>{});  // ((2, 2), MMA_N, MMA_D) fp32
    clear(acc_dk);
    clear(acc_dv);
    Tensor cS = make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{});  // (BLK_M, BLK_N) -> (row, col)
    Tensor tScS = rowcol_view(thr_sdp.partition_C(cS));                     // (rows, cols) -> (row, col)

    // StreamingLLM sink tokens (Variant::kSinks kernels): a block that may hold sink keys is seen
    // by more rows (QueryBlockRange's sinks), and its products take the full mask (p_and_ds's sinks).
    const QueryBlockRange<kBlockM, kBlockN> range(params.variant, tile, n_block, Variant::kSinks);
    std::conditional_t<Variant::kSinks, bool, cute::false_type> sink_block{};
    if constexpr (Variant::kSinks) sink_block = range.sink_block(params.variant, n_block);
    if (!range.empty()) {  // else no row sees these keys: dK = dV = 0 below
      const Mainloop mainloop(params.mainloop, tile, smem.mainloop);
      const Variant variant(params.variant, tile);
      const Dropout dropout(params.dropout, tile, params.scheduler.heads_q);
      const bool dq_atomic = params.epilogue.dq_accum != nullptr;

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
        const bool needs_mask = KeyBlockRange<kBlockM, kBlockN>(params.variant, tile).needs_mask(n_block);
        Tensor s = rowcol_view(acc_s);    // (rows, cols)
        Tensor dp = rowcol_view(acc_dp);  // (rows, cols)
        variant.template p_and_ds<Traits::kTile.masked_simple>(s, dp, tScS, m_block, n_block, needs_mask,
                                                               lse_log2, dsum, dropout, sink_block);
        mainloop.store_p_ds(acc_s, acc_dp, /*store_p=*/true);
        __syncthreads();  // (2)

        // dQ before or after dV and dK (bwd_tile_size.h, dq_first: measured per head-dim bucket):
        // first, its reductions to global memory drain while dV and dK are computed.
        auto dq_product = [&]() __attribute__((always_inline)) {
          if (!dq_atomic) return;
          Tensor acc_dq = partition_fragment_C(
              typename Traits::TiledMmadQ{}, Shape<Int<kBlockM>, Int<kHeadDim>>{});  // ((2, 2), MMA_M, MMA_D)
          clear(acc_dq);
          mainloop.gemm_dq(acc_dq);
          add_dq_atomic<Traits>(acc_dq, params.epilogue, tile, params.scheduler.seqlen_q,
                                params.scheduler.heads_q, m_block);
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

    const Epilogue epilogue(params.epilogue, tile, n_block, params.mainloop.in.head_dim);
    epilogue.store(acc_dk, acc_dv, params.variant.softmax_scale, params.mainloop.in.kv_group,
                   params.scheduler.seqlen_k, smem.mainloop.k.data(), smem.mainloop.v.data());
  }
};

// Deterministic mode: one CTA = one query block of one head (TileScheduler: the forward's).
template <typename Mainloop, typename Epilogue, typename TileScheduler, typename Variant, typename Dropout>
struct FlashBwdDqKernel : BwdKernelBase<Mainloop, Epilogue, TileScheduler, Variant, Dropout> {
  using Base = BwdKernelBase<Mainloop, Epilogue, TileScheduler, Variant, Dropout>;
  using Base::kBlockM;
  using Base::kBlockN;
  using Base::kHeadDim;
  using typename Base::Params;
  using typename Base::SharedStorage;
  using typename Base::Traits;

  static dim3 grid(const Params& params) { return TileScheduler::grid(params.scheduler, kBlockM); }

  __device__ void operator()(const Params& params, SharedStorage& smem) const {
    const WorkTile tile = TileScheduler::get_tile(params.scheduler);
    if (tile.m_block * kBlockM >= tile.q_len) return;  // varlen: past this sequence's end

    typename Traits::TiledMmaSdP mma_sdp;
    auto thr_sdp = mma_sdp.get_thread_slice(threadIdx.x);
    Tensor acc_dq = partition_fragment_C(
        typename Traits::TiledMmadQ{}, Shape<Int<kBlockM>, Int<kHeadDim>>{});  // ((2, 2), MMA_M, MMA_D) fp32
    clear(acc_dq);
    Tensor cS = make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{});  // (BLK_M, BLK_N) -> (row, col)
    Tensor tScS = rowcol_view(thr_sdp.partition_C(cS));                     // (rows, cols) -> (row, col)

    const KeyBlockRange<kBlockM, kBlockN> range(params.variant, tile);
    // StreamingLLM sink tokens (Variant::kSinks kernels): the blocks [0, sink_end) first, with the
    // full mask (p_and_ds's sinks), then the window's from max(n_min, sink_end) (as the forward).
    const int sink_end = Variant::kSinks ? KeyBlockRange<kBlockM, kBlockN>::sink_end(params.variant, tile) : 0;
    const int lo_block = Variant::kSinks && sink_end > range.n_min ? sink_end : range.n_min;
    if (Variant::kSinks ? sink_end > 0 || range.n_max > lo_block : !range.empty()) {  // else dQ = 0
      const Mainloop mainloop(params.mainloop, tile, smem.mainloop);
      const Variant variant(params.variant, tile);
      const Dropout dropout(params.dropout, tile, params.scheduler.heads_q);
      float lse_log2[Traits::kRowsPerThread], dsum[Traits::kRowsPerThread];
      mainloop.load_row_stats(tScS, tile.m_block, lse_log2, dsum);
      mainloop.load_q(tile.m_block, 0);
      mainloop.load_do(tile.m_block, 0);
      // Without sink tokens: n_min to n_max. With them (one loop, one copy of the body):
      // [0, sink_end), then a jump to lo_block. sinks: cute::false_type without (p_and_ds's code
      // without sink tokens, exactly).
      constexpr bool kSinks = Variant::kSinks;
      for (int n_block = kSinks && sink_end > 0 ? 0 : lo_block;
           kSinks ? n_block < sink_end || n_block < range.n_max : n_block < range.n_max;
           n_block = kSinks && n_block + 1 == sink_end ? lo_block : n_block + 1) {
        std::conditional_t<kSinks, bool, cute::false_type> sinks{};
        if constexpr (kSinks) sinks = n_block < sink_end;
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
        variant.template p_and_ds<Traits::kTile.masked_simple>(
            s, dp, tScS, tile.m_block, n_block, range.needs_mask(n_block), lse_log2, dsum, dropout, sinks);
        mainloop.store_p_ds(acc_s, acc_dp, /*store_p=*/false);
        __syncthreads();  // (2) dS written

        mainloop.gemm_dq(acc_dq);
        __syncthreads();  // (3) every warp done with K(n), dS before they are overwritten
      }
    }
    store_dq<Traits>(acc_dq, params.epilogue, tile, params.variant.softmax_scale, params.mainloop.in.head_dim,
                     smem.mainloop.q.data());
  }
};

// dQ = scale · dq_accum -> the dtype output, atomic mode (grid and tile as FlashBwdDqKernel's).
// The tile is read back into the accumulator fragment it was added from (epilogue_bwd.h), so the
// store is the deterministic kernel's (through shared memory, 16-byte stores).
template <typename Mainloop, typename Epilogue, typename TileScheduler, typename Variant, typename Dropout>
struct BwdConvertDqKernel : BwdKernelBase<Mainloop, Epilogue, TileScheduler, Variant, Dropout> {
  using Base = BwdKernelBase<Mainloop, Epilogue, TileScheduler, Variant, Dropout>;
  using Base::kBlockM;
  using Base::kHeadDim;
  using typename Base::Params;
  using typename Base::Traits;

  struct SharedStorage {
    array_aligned<typename Base::Element, cosize_v<typename Traits::SmemLayoutQdO>, 128> dq;  // (BLK_M, HDIM)
  };
  static constexpr int kSharedStorageBytes = int(sizeof(SharedStorage));
  static_assert(kSharedStorageBytes <= 48 * 1024, "the conversion kernel stages one dQ tile");

  static dim3 grid(const Params& params) { return TileScheduler::grid(params.scheduler, kBlockM); }

  __device__ void operator()(const Params& params, SharedStorage& smem) const {
    const WorkTile tile = TileScheduler::get_tile(params.scheduler);
    if (tile.m_block * kBlockM >= tile.q_len) return;  // varlen: past this sequence's end
    Tensor acc_dq = partition_fragment_C(typename Traits::TiledMmadQ{},
                                         Shape<Int<kBlockM>, Int<kHeadDim>>{});  // ((2, 2), MMA_M, MMA_D)
    load_dq_accum<Traits>(acc_dq, params.epilogue, tile, params.scheduler.seqlen_q, params.scheduler.heads_q,
                          tile.m_block);
    store_dq<Traits>(acc_dq, params.epilogue, tile, params.variant.softmax_scale, params.mainloop.in.head_dim,
                     smem.dq.data());
  }
};

}  // namespace sm80
}  // namespace flashlab
