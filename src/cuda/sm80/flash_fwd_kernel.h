// src/cuda/sm80/flash_fwd_kernel.h — the forward kernel: wires its pieces, computes nothing.
//
// FlashFwdKernel is templated on its pieces, each a struct with a host Arguments, a device Params
// and to_params() (CUTLASS's collective / kernel / device split):
//   TileScheduler  common::FwdTileScheduler   which (query block, head, sequence) a CTA owns
//   Mainloop       MainloopFwd<Traits>        loads and matrix products (mainloop_fwd.h)
//   Variant        common::ScoreVariant       score transform and mask (common/variant.h)
//   Dropout        common::Dropout<k>         keep-mask on P (common/dropout.h)
//   Epilogue       EpilogueFwd<Traits>        O and LSE out (epilogue_fwd.h)
// Its Params hold each piece's Params; its SharedStorage is the pieces' storage (the mainloop's
// and the epilogue's alias: O is staged where Q was). device_kernel<Kernel> (kernel_pieces.h) is
// the __global__.
//
//   tile      = TileScheduler::get_tile()           which (query block, head, sequence)
//   range     = KeyBlockRange(mask, tile)           key blocks that can hold a visible key
//   for key blocks, last to first:                  (the masked diagonal block comes first; blocks
//                                                   that need no mask run in a loop of their own)
//     S = Q·Kᵀ                                      Mainloop::gemm_qk
//     S = variant(S)                                Variant::before_softmax: scale, softcap, ALiBi, mask
//     P = softmax.update(S, O)                      OnlineSoftmax: m, l, O rescale
//     P = dropout(P)                                Dropout
//     O += P·V                                      Mainloop::gemm_pv (P stays in registers)
//   O /= l; LSE                                     OnlineSoftmax::finalize
//   store O, LSE                                    Epilogue
//
// Pipelining (as FlashAttention-2 on sm80): one K and one V buffer. While S = Q·K(n) runs, V(n)
// is in flight; while P·V(n) runs, K(n - 1) is in flight. Two barriers per key block:
//   (1) after K(n) landed: every warp also finished P·V(n + 1), so V's buffer may be refilled;
//   (2) after V(n) landed: every warp also finished Q·K(n), so K's buffer may be refilled.
#pragma once

#include <cute/tensor.hpp>

#include "cuda/common/block_range.h"
#include "cuda/common/kernel_args.h"
#include "cuda/common/softmax.h"
#include "cuda/common/tile_scheduler.h"
#include "cuda/sm80/fragments.h"
#include "cuda/sm80/kernel_pieces.h"

namespace flashlab {
namespace sm80 {

using namespace cute;

template <typename Mainloop_, typename Epilogue_, typename TileScheduler_, typename Variant_,
          typename Dropout_>
struct FlashFwdKernel : KernelPieces<Mainloop_, Epilogue_, TileScheduler_, Variant_, Dropout_> {
  using Base = KernelPieces<Mainloop_, Epilogue_, TileScheduler_, Variant_, Dropout_>;
  using Base::kBlockM;
  using Base::kBlockN;
  using Base::kHeadDim;
  using typename Base::Dropout;
  using typename Base::Element;
  using typename Base::Epilogue;
  using typename Base::Mainloop;
  using typename Base::Params;
  using typename Base::TileScheduler;
  using typename Base::Traits;
  using typename Base::Variant;

  static Params to_params(const common::FwdArguments& a) {
    return Params{TileScheduler::to_params(a.seq), Mainloop::to_params(a.in), Variant::to_params(a.score),
                  Dropout::to_params(a.dropout), Epilogue::to_params(a.out)};
  }

  union SharedStorage {
    typename Mainloop::SharedStorage mainloop;
    typename Epilogue::SharedStorage epilogue;
  };
  static constexpr int kSharedStorageBytes = int(sizeof(SharedStorage));
  static_assert(kSharedStorageBytes == Traits::kSmemBytes,
                "the storage is exactly the tiles tile_size.h counts");

  static dim3 grid(const Params& params) { return TileScheduler::grid(params.scheduler, kBlockM); }

  __device__ void operator()(const Params& params, SharedStorage& smem) const {
    const WorkTile tile = TileScheduler::get_tile(params.scheduler);
    if (tile.m_block * kBlockM >= tile.q_len) return;  // varlen: past this sequence's end (CTA-uniform)

    typename Traits::TiledMma mma;
    auto thr_mma = mma.get_thread_slice(static_cast<int>(threadIdx.x));  // int: coordinates stay signed
    Tensor acc_o =
        partition_fragment_C(mma, Shape<Int<kBlockM>, Int<kHeadDim>>{});  // ((2, 2), MMA_M, HDIM / 8) fp32
    clear(acc_o);
    Tensor o = rowcol_view(acc_o);                                          // (rows, HDIM cols)
    Tensor cS = make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{});  // (BLK_M, BLK_N) -> (row, col)
    Tensor tScS = rowcol_view(thr_mma.partition_C(cS));                     // (rows, cols) -> (row, col)

    const KeyBlockRange<kBlockM, kBlockN> range(params.variant, tile);
    const Variant variant(params.variant, tile);
    const Dropout dropout(params.dropout, tile, params.scheduler.heads_q);
    OnlineSoftmax<Traits::kRowsPerThread> softmax;

    // StreamingLLM sink tokens (kSinks: the kernel launched when sink_tokens > 0; the other one
    // compiles to the code without them, measured 12-14 % faster at hdim 128 than one kernel for
    // both): blocks [0, sink_end) with the full mask (the sink loop, last), the window's blocks
    // from lo_block on. Blocks are visited in descending order, the gap between the two ranges
    // skipped (the prefetch's next block). Without sink tokens sink_end = 0 and lo_block = n_min.
    constexpr bool kSinks = Variant::kSinks;
    const int sink_end = kSinks ? KeyBlockRange<kBlockM, kBlockN>::sink_end(params.variant, tile) : 0;
    const int lo_block = kSinks && sink_end > range.n_min ? sink_end : range.n_min;
    const int first_block = range.n_max > lo_block ? range.n_max - 1 : sink_end - 1;
    if (kSinks ? first_block >= 0 : !range.empty()) {  // else every row of the CTA sees no key: O = 0, LSE = -inf below
      const Mainloop mainloop(params.mainloop, tile, smem.mainloop);
      const float scale_log2 = variant.softmax_scale_log2();
      // One key block; kMask: apply the per-element mask (kSinkBlock: with the sink keys). Barriers as
      // described above.
      auto step = [&](int n_block, auto mask_flag, auto sinks_flag) __attribute__((always_inline)) {
        constexpr bool kMask = decltype(mask_flag)::value;
        constexpr bool kSinkBlock = decltype(sinks_flag)::value;
        Tensor acc_s =
            partition_fragment_C(mma, Shape<Int<kBlockM>, Int<kBlockN>>{});  // ((2, 2), MMA_M, MMA_N) fp32
        clear(acc_s);
        cp_async_wait<0>();
        __syncthreads();  // (1)
        mainloop.load_v(n_block);
        cp_async_fence();

        mainloop.gemm_qk(acc_s);
        Tensor s = rowcol_view(acc_s);  // (rows, cols)
        variant.template before_softmax<kMask, kSinkBlock>(s, tScS, n_block);

        cp_async_wait<0>();
        __syncthreads();  // (2)
        if constexpr (kSinks) {
          // The next block: the window's, then the sink blocks below sink_end (-1: none).
          const int next = n_block - 1 < lo_block && n_block - 1 >= sink_end ? sink_end - 1 : n_block - 1;
          if (next >= 0) {
            mainloop.load_k(next);
            cp_async_fence();
          }
        } else if (n_block > range.n_min) {
          mainloop.load_k(n_block - 1);
          cp_async_fence();
        }

        softmax.update(s, o, scale_log2);
        dropout.apply(s, tScS, tile.m_block * kBlockM, n_block * kBlockN);
        Tensor rP = convert_fragment<Element>(acc_s);                        // ((2, 2), MMA_M, MMA_N) 16-bit
        Tensor tOrP = make_tensor(rP.data(), acc_to_a_layout(rP.layout()));  // ((2, 2, 2), MMA_M, BLK_N / 16)
        mainloop.gemm_pv(acc_o, tOrP);
      };
      mainloop.load_q();
      mainloop.load_k(kSinks ? first_block : range.n_max - 1);
      cp_async_fence();
      // Last to first, in three loops: blocks that need the mask (the causal diagonal, the sequence
      // end), the blocks every row sees whole (no mask code compiled in), the masked rest (a
      // window's left edge). Separate loops keep the mask instructions out of the unmasked blocks'
      // stream.
      // With sink tokens the third loop goes on from lo_block to the sink blocks [0, sink_end).
      // In the kSinks kernel every masked block takes the sink keys: a window block's sink bound
      // is <= its first key (s_i <= sink_end * N), so it masks as before. Two step instantiations
      // and three inlined copies, as without sink tokens: with a fourth loop nvcc outlined the
      // epilogue (acc_o through local memory, 528 bytes of stack; the forward 1.7x slower).
      using SinkKeys = cute::bool_constant<kSinks>;
      const int unmasked_begin = range.unmasked_begin(), unmasked_end = range.unmasked_end();
      int n_block = range.n_max - 1;
      for (; n_block >= unmasked_end && (!kSinks || n_block >= lo_block); --n_block)
        step(n_block, cute::true_type{}, SinkKeys{});
      for (; n_block >= unmasked_begin && (!kSinks || n_block >= lo_block); --n_block)
        step(n_block, cute::false_type{}, cute::false_type{});
      if constexpr (kSinks) {
        if (n_block < lo_block) n_block = sink_end - 1;  // the window's blocks done (or none)
      }
      for (; n_block >= (kSinks ? 0 : lo_block); n_block = kSinks && n_block == lo_block ? sink_end - 1 : n_block - 1)
        step(n_block, cute::true_type{}, SinkKeys{});
    }

    float lse[Traits::kRowsPerThread];
    softmax.finalize(o, variant.lse_scale(), dropout.keep_scale(), lse, variant.sink_logit());
    const Epilogue epilogue(params.epilogue, tile);
    epilogue.store(acc_o, lse, smem.epilogue);
  }
};

}  // namespace sm80
}  // namespace flashlab
