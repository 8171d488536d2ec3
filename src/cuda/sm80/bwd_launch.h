// src/cuda/sm80/bwd_launch.h — from BwdArguments to the backward's launches on the caller's stream.
//
// run_bwd<dtype, head_dim>() is what the generated instantiations compile. In stream order:
//   1. cudaMemsetAsync(0): GQA with atomics: dk_accum, dv_accum
//   2. bwd_preprocess_kernel      D = rowsum(dO ∘ O); dq_accum's tiles = 0 (atomic dQ) (common/bwd_prepost.h)
//   3. FlashBwdKernel             dK, dV (and dq_accum += dS·K in atomic mode)
//   4. deterministic: FlashBwdDqKernel (dQ directly); else BwdConvertDqKernel (dq_accum -> dQ)
//   5. GQA: bwd_convert_dkv_kernel                                    (common/bwd_prepost.h)
// No host synchronization and no allocation: grids come from the maximum sequence lengths, CTAs
// past a varlen sequence return at once, and all scratch is the caller's workspace.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "cuda/common/bwd_prepost.h"
#include "cuda/common/bwd_workspace.h"
#include "cuda/common/dropout.h"
#include "cuda/common/kernel_args.h"
#include "cuda/common/launch.h"
#include "cuda/common/static_switch.h"
#include "cuda/common/tile_scheduler.h"
#include "cuda/common/variant.h"
#include "cuda/sm80/bwd_kernel_traits.h"
#include "cuda/sm80/epilogue_bwd.h"
#include "cuda/sm80/flash_bwd_kernel.h"
#include "cuda/sm80/fwd_launch.h"  // kImplName
#include "cuda/sm80/mainloop_bwd.h"

namespace flashlab {
namespace sm80 {

// The backward kernels of one instantiation, from their pieces. kSinks: compiled for StreamingLLM
// sink tokens (common::ScoreVariant's kSinks; kernels of their own, launched when sink_tokens > 0).
template <typename Traits, bool kDropout, bool kSinks = false>
using BwdMainKernel =
    FlashBwdKernel<MainloopBwd<Traits>, EpilogueDkv<Traits>, common::BwdTileScheduler,
                   common::ScoreVariant<Traits::kBlockM, Traits::kBlockN, kSinks>, common::Dropout<kDropout>>;
template <typename Traits, bool kDropout, bool kSinks = false>
using BwdDqKernel =
    FlashBwdDqKernel<MainloopBwd<Traits>, EpilogueDkv<Traits>, common::FwdTileScheduler,
                     common::ScoreVariant<Traits::kBlockM, Traits::kBlockN, kSinks>, common::Dropout<kDropout>>;
template <typename Traits>
using BwdDqConvertKernel =
    BwdConvertDqKernel<MainloopBwd<Traits>, EpilogueDkv<Traits>, common::FwdTileScheduler,
                       common::ScoreVariant<Traits::kBlockM, Traits::kBlockN>, common::Dropout<false>>;

// Prepares and launches one kernel struct (no launch for an empty grid).
template <typename Kernel>
Status launch(const common::BwdArguments& args, cudaStream_t stream, const char* what) {
  constexpr int kSmem = Kernel::kSharedStorageBytes;
  const typename Kernel::Params params = Kernel::to_params(args);
  const dim3 grid = Kernel::grid(params);
  if (!common::nonempty(grid)) return Status::Ok();
  FLASHLAB_RETURN_IF_ERROR(
      common::prepare_kernel<&device_kernel<Kernel>>(kSmem, kImplName, what, Kernel::kHeadDim));
  device_kernel<Kernel><<<grid, Kernel::kThreads, kSmem, stream>>>(params);
  return common::cuda_error(cudaGetLastError(), kImplName, what);
}

template <typename Traits, bool kDropout, bool kSinks>
Status launch_bwd(const common::BwdArguments& args, cudaStream_t stream) {
  using Element = typename Traits::Element;
  FLASHLAB_RETURN_IF_ERROR(
      common::bwd_prologue<Element>(args, Traits::kBlockM, Traits::kHeadDim, stream, kImplName));
  using Main = BwdMainKernel<Traits, kDropout, kSinks>;
  using DqDeterministic = BwdDqKernel<Traits, kDropout, kSinks>;
  FLASHLAB_RETURN_IF_ERROR(launch<Main>(args, stream, "backward kernel"));
  if (args.deterministic) {
    FLASHLAB_RETURN_IF_ERROR(launch<DqDeterministic>(args, stream, "backward dQ kernel"));
  } else {
    FLASHLAB_RETURN_IF_ERROR(
        launch<BwdDqConvertKernel<Traits>>(args, stream, "backward dQ conversion kernel"));
  }
  return common::bwd_epilogue_dkv<Element>(args, stream, kImplName);
}

// The tile set (bwd_tile_size.h): the largest whose shared memory the device's opt-in limit holds
// — Hopper (D 256 only; H100, H200), large (A100, H100), else small (<= 99 KiB: sm_86 / sm_89).
// The limit is cached per device (common/launch.h): no attribute query per call.
template <DType kDType, int kHeadDim>
Status run_bwd(const common::BwdArguments& args_in, void* stream_ptr) {
  // The deterministic mode computes dQ in a kernel of its own, without reductions: the workspace's
  // dq_accum and semaphores (reserved for cuda_sm90's ordered reductions) stay unused and unzeroed;
  // a null dq_accum is what selects that path (flash_bwd_kernel.h).
  common::BwdArguments args = args_in;
  if (args.deterministic) {
    args.grad.dq_accum = nullptr;
    args.grad.dq_semaphore = nullptr;
  }
  using Element = typename common::ElementOf<kDType>::type;
  using Small = BwdKernelTraits<kHeadDim, Element, BwdTileSet::kSmall>;
  using Large = BwdKernelTraits<kHeadDim, Element, BwdTileSet::kLarge>;
  using Hopper = BwdKernelTraits<kHeadDim, Element, BwdTileSet::kHopper>;
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  int device = 0;
  const common::DeviceFacts* facts = nullptr;
  FLASHLAB_RETURN_IF_ERROR(common::current_device(&device, &facts));
  const bool large = facts->smem_optin >= Large::kSmemBytes;
  const bool hopper = facts->smem_optin >= Hopper::kSmemBytes;
  return FLASHLAB_BOOL_SWITCH(args.dropout_enabled, kDropout, [&] {
    return FLASHLAB_BOOL_SWITCH(args.score.sink_tokens > 0, kSinks, [&] {
      if constexpr (Hopper::kSmemBytes != Large::kSmemBytes) {  // D 256: the Hopper set differs
        if (hopper) return launch_bwd<Hopper, kDropout, kSinks>(args, stream);
      }
      return FLASHLAB_BOOL_SWITCH(large, kLargeTiles, [&] {
        using Traits = std::conditional_t<kLargeTiles, Large, Small>;
        return launch_bwd<Traits, kDropout, kSinks>(args, stream);
      });
    });
  });
}

}  // namespace sm80
}  // namespace flashlab
