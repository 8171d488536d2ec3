// src/cuda/sm80/fwd_launch.h — from FwdArguments to a kernel launch on the caller's stream.
//
// run_fwd<dtype, head_dim>() is what the generated instantiations compile: it picks the tile size
// (tile_size.h), turns the dropout flag into a template parameter (common/static_switch.h),
// assembles the kernel from its pieces and launches it. No host synchronization, no allocation:
// the grid comes from the maximum sequence lengths, and a CTA past its (varlen) sequence returns
// at once. The device's shared-memory limit and the opt-in are cached (common/launch.h).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "cuda/common/dropout.h"
#include "cuda/common/kernel_args.h"
#include "cuda/common/launch.h"
#include "cuda/common/static_switch.h"
#include "cuda/common/tile_scheduler.h"
#include "cuda/common/variant.h"
#include "cuda/sm80/epilogue_fwd.h"
#include "cuda/sm80/flash_fwd_kernel.h"
#include "cuda/sm80/kernel_traits.h"
#include "cuda/sm80/mainloop_fwd.h"
#include "cuda/sm80/tile_size.h"

namespace flashlab {
namespace sm80 {

constexpr const char* kImplName = "cuda_sm80";

// The forward kernel of one instantiation, from its pieces. kSinks: compiled for StreamingLLM sink
// tokens (common::ScoreVariant's kSinks; a kernel of its own, launched when sink_tokens > 0).
template <typename Traits, bool kDropout, bool kSinks = false>
using FwdKernel =
    FlashFwdKernel<MainloopFwd<Traits>, EpilogueFwd<Traits>, common::FwdTileScheduler,
                   common::ScoreVariant<Traits::kBlockM, Traits::kBlockN, kSinks>, common::Dropout<kDropout>>;

template <typename Kernel>
Status launch_fwd(const common::FwdArguments& args, cudaStream_t stream) {
  constexpr int kSmem = Kernel::kSharedStorageBytes;
  static_assert(kSmem <= 99 * 1024, "tile_size.h promises <= 99 KiB of shared memory (sm_86 / sm_89 limit)");
  const typename Kernel::Params params = Kernel::to_params(args);
  const dim3 grid = Kernel::grid(params);
  if (!common::nonempty(grid)) return Status::Ok();  // no query rows at all
  FLASHLAB_RETURN_IF_ERROR(
      common::prepare_kernel<&device_kernel<Kernel>>(kSmem, kImplName, "forward", Kernel::kHeadDim));
  device_kernel<Kernel><<<grid, Kernel::kThreads, kSmem, stream>>>(params);
  return common::cuda_error(cudaGetLastError(), kImplName, "forward kernel launch");
}

template <DType kDType, int kHeadDim>
Status run_fwd(const common::FwdArguments& args, void* stream) {
  using Element = typename common::ElementOf<kDType>::type;
  return FLASHLAB_BOOL_SWITCH(args.dropout_enabled, kDropout, [&] {
    constexpr FwdTileSize kTile = fwd_tile_size(kHeadDim, kDropout);
    using Traits = FwdKernelTraits<kHeadDim, kTile.block_m, kTile.block_n, kTile.warps, Element>;
    return FLASHLAB_BOOL_SWITCH(args.score.sink_tokens > 0, kSinks, [&] {
      return launch_fwd<FwdKernel<Traits, kDropout, kSinks>>(args, static_cast<cudaStream_t>(stream));
    });
  });
}

}  // namespace sm80
}  // namespace flashlab
