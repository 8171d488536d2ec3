// src/cuda/sm80/fwd_launch.h — from FwdKernelParams to a kernel launch on the caller's stream.
//
// run_fwd<dtype, head_dim>() is what the generated instantiations compile: it picks the tile size
// (tile_size.h), turns the dropout flag into a template parameter (static_switch.h) and launches.
// No host synchronization, no allocation: the grid comes from the maximum sequence lengths, and a
// CTA past its (varlen) sequence returns at once.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include <cutlass/numeric_types.h>

#include "cuda/sm80/flash_fwd_kernel.h"
#include "cuda/sm80/fwd_params.h"
#include "cuda/sm80/kernel_traits.h"
#include "cuda/sm80/static_switch.h"
#include "cuda/sm80/tile_scheduler.h"
#include "cuda/sm80/tile_size.h"

namespace flashlab {
namespace sm80 {

template <DType kDType>
struct ElementOf;
template <>
struct ElementOf<DType::kBFloat16> {
  using type = cutlass::bfloat16_t;
};
template <>
struct ElementOf<DType::kFloat16> {
  using type = cutlass::half_t;
};

inline Status cuda_error(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return Status::Ok();
  return Status(StatusCode::kDeviceError,
                "impl cuda_sm80: " + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

template <typename Traits, bool kDropout>
Status launch_fwd(const FwdKernelParams& params, cudaStream_t stream) {
  constexpr int kSmem = Traits::kSmemBytes;
  static_assert(kSmem <= 99 * 1024, "tile_size.h promises <= 99 KiB of shared memory (sm_86 / sm_89 limit)");
  const dim3 grid = FwdTileScheduler::grid(params.seq, Traits::kBlockM);
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return Status::Ok();  // no query rows at all

  auto kernel = &flash_fwd_kernel<Traits, kDropout>;
  int device = 0, optin = 0;
  FLASHLAB_RETURN_IF_ERROR(cuda_error(cudaGetDevice(&device), "cudaGetDevice"));
  FLASHLAB_RETURN_IF_ERROR(
      cuda_error(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                 "cudaDeviceGetAttribute"));
  if (kSmem > optin)
    return Status::Unsupported("impl cuda_sm80: head-dim bucket " + std::to_string(Traits::kHeadDim) +
                               " needs " + std::to_string(kSmem) +
                               " bytes of shared memory per block; this GPU allows " + std::to_string(optin));
  if (kSmem > 48 * 1024)
    FLASHLAB_RETURN_IF_ERROR(
        cuda_error(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem),
                   "cudaFuncSetAttribute"));
  kernel<<<grid, Traits::kNThreads, kSmem, stream>>>(params);
  return cuda_error(cudaGetLastError(), "forward kernel launch");
}

template <DType kDType, int kHeadDim>
Status run_fwd(const FwdKernelParams& params, void* stream) {
  using Element = typename ElementOf<kDType>::type;
  return FLASHLAB_BOOL_SWITCH(params.dropout_enabled, kDropout, [&] {
    constexpr FwdTileSize kTile = fwd_tile_size(kHeadDim, kDropout);
    using Traits = FwdKernelTraits<kHeadDim, kTile.block_m, kTile.block_n, kTile.warps, Element>;
    return launch_fwd<Traits, kDropout>(params, static_cast<cudaStream_t>(stream));
  });
}

}  // namespace sm80
}  // namespace flashlab
