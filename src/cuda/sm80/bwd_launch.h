// src/cuda/sm80/bwd_launch.h — from BwdKernelParams to the backward's launches on the caller's stream.
//
// run_bwd<dtype, head_dim>() is what the generated instantiations compile. In stream order:
//   1. cudaMemsetAsync(0): dq_accum's tiles (atomic dQ); GQA with atomics: dk_accum, dv_accum
//   2. bwd_preprocess_kernel      D = rowsum(dO ∘ O)
//   3. flash_bwd_kernel           dK, dV (and dq_accum += dS·K in atomic mode)
//   4. deterministic: flash_bwd_dq_kernel (dQ directly); else bwd_convert_dq_kernel (dq_accum -> dQ)
//   5. GQA: bwd_convert_dkv_kernel
// No host synchronization and no allocation: grids come from the maximum sequence lengths, CTAs
// past a varlen sequence return at once, and all scratch is the caller's workspace.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <type_traits>

#include "cuda/sm80/bwd_kernel_traits.h"
#include "cuda/sm80/bwd_mask.h"
#include "cuda/sm80/bwd_params.h"
#include "cuda/sm80/bwd_prepost.h"
#include "cuda/sm80/flash_bwd_kernel.h"
#include "cuda/sm80/fwd_launch.h"  // ElementOf, cuda_error
#include "cuda/sm80/static_switch.h"
#include "cuda/sm80/tile_scheduler.h"

namespace flashlab {
namespace sm80 {

// Opts `kernel` into kSmem bytes of dynamic shared memory when it needs more than the default 48 KiB.
template <typename Kernel>
Status allow_smem(Kernel kernel, int smem, int head_dim) {
  int device = 0, optin = 0;
  FLASHLAB_RETURN_IF_ERROR(cuda_error(cudaGetDevice(&device), "cudaGetDevice"));
  FLASHLAB_RETURN_IF_ERROR(
      cuda_error(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                 "cudaDeviceGetAttribute"));
  if (smem > optin)
    return Status::Unsupported("impl cuda_sm80: backward for head-dim bucket " + std::to_string(head_dim) +
                               " needs " + std::to_string(smem) +
                               " bytes of shared memory per block; this GPU allows " + std::to_string(optin));
  if (smem > 48 * 1024)
    return cuda_error(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                      "cudaFuncSetAttribute");
  return Status::Ok();
}

inline bool nonempty(dim3 g) {
  return g.x > 0 && g.y > 0 && g.z > 0;
}

template <typename Traits, bool kDropout>
Status launch_bwd(const BwdKernelParams& params, cudaStream_t stream) {
  using Element = typename Traits::Element;
  constexpr int kSmem = Traits::kSmemBytes;
  const SeqParams& seq = params.seq;
  const BwdGradParams& g = params.grad;

  const dim3 grid_tiles_q = FwdTileScheduler::grid(seq, Traits::kBlockM);  // (query blocks, heads_q, batch)
  if (g.dq_accum != nullptr) {  // the tiles the main kernel adds to (bwd_params.h)
    const size_t bytes = size_t(grid_tiles_q.z) * grid_tiles_q.x * grid_tiles_q.y * Traits::kBlockM *
                         Traits::kHeadDim * sizeof(float);
    FLASHLAB_RETURN_IF_ERROR(
        cuda_error(cudaMemsetAsync(g.dq_accum, 0, bytes, stream), "cudaMemsetAsync(dq_accum)"));
  }
  if (g.dkv_mode == DkvMode::kAtomic) {
    const size_t bytes = size_t(g.rows_k) * size_t(g.heads_acc) * size_t(params.in.head_dim) * sizeof(float);
    FLASHLAB_RETURN_IF_ERROR(
        cuda_error(cudaMemsetAsync(g.dk_accum, 0, bytes, stream), "cudaMemsetAsync(dk_accum)"));
    FLASHLAB_RETURN_IF_ERROR(
        cuda_error(cudaMemsetAsync(g.dv_accum, 0, bytes, stream), "cudaMemsetAsync(dv_accum)"));
  }

  const dim3 grid_rows_q((seq.seqlen_q + kPrepostRows - 1) / kPrepostRows, seq.heads_q, seq.batch);
  if (nonempty(grid_rows_q)) {
    bwd_preprocess_kernel<Element><<<grid_rows_q, kPrepostThreads, 0, stream>>>(params);
    FLASHLAB_RETURN_IF_ERROR(cuda_error(cudaGetLastError(), "backward preprocess kernel launch"));
  }

  const dim3 grid_main = BwdTileScheduler::grid(seq, Traits::kBlockN);
  if (nonempty(grid_main)) {
    auto kernel = &flash_bwd_kernel<Traits, kDropout>;
    FLASHLAB_RETURN_IF_ERROR(allow_smem(kernel, kSmem, Traits::kHeadDim));
    kernel<<<grid_main, Traits::kNThreads, kSmem, stream>>>(params);
    FLASHLAB_RETURN_IF_ERROR(cuda_error(cudaGetLastError(), "backward kernel launch"));
  }

  if (params.deterministic) {
    if (nonempty(grid_tiles_q)) {
      auto kernel = &flash_bwd_dq_kernel<Traits, kDropout>;
      FLASHLAB_RETURN_IF_ERROR(allow_smem(kernel, kSmem, Traits::kHeadDim));
      kernel<<<grid_tiles_q, Traits::kNThreads, kSmem, stream>>>(params);
      FLASHLAB_RETURN_IF_ERROR(cuda_error(cudaGetLastError(), "backward dQ kernel launch"));
    }
  } else if (nonempty(grid_tiles_q)) {
    static_assert(Traits::kSmemQdOBytes <= 48 * 1024, "the conversion kernel stages one dQ tile");
    bwd_convert_dq_kernel<Traits><<<grid_tiles_q, Traits::kNThreads, Traits::kSmemQdOBytes, stream>>>(params);
    FLASHLAB_RETURN_IF_ERROR(cuda_error(cudaGetLastError(), "backward dQ conversion kernel launch"));
  }

  if (g.dkv_mode != DkvMode::kDirect) {
    const dim3 grid_rows_k((seq.seqlen_k + kPrepostRows - 1) / kPrepostRows, g.heads_kv, seq.batch);
    if (nonempty(grid_rows_k)) {
      bwd_convert_dkv_kernel<Element><<<grid_rows_k, kPrepostThreads, 0, stream>>>(params);
      FLASHLAB_RETURN_IF_ERROR(cuda_error(cudaGetLastError(), "backward dK/dV conversion kernel launch"));
    }
  }
  return Status::Ok();
}

// The tile set (bwd_tile_size.h): the largest whose shared memory the device's opt-in limit holds
// — Hopper (D 256 only; H100, H200), large (A100, H100), else small (<= 99 KiB: sm_86 / sm_89).
// One attribute query per call, no synchronization.
template <DType kDType, int kHeadDim>
Status run_bwd(const BwdKernelParams& params, void* stream) {
  using Element = typename ElementOf<kDType>::type;
  using Small = BwdKernelTraits<kHeadDim, Element, 0>;
  using Large = BwdKernelTraits<kHeadDim, Element, 1>;
  using Hopper = BwdKernelTraits<kHeadDim, Element, 2>;
  int device = 0, optin = 0;
  FLASHLAB_RETURN_IF_ERROR(cuda_error(cudaGetDevice(&device), "cudaGetDevice"));
  FLASHLAB_RETURN_IF_ERROR(
      cuda_error(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                 "cudaDeviceGetAttribute"));
  const bool large = optin >= Large::kSmemBytes;
  const bool hopper = optin >= Hopper::kSmemBytes;
  return FLASHLAB_BOOL_SWITCH(params.dropout_enabled, kDropout, [&] {
    if constexpr (Hopper::kSmemBytes != Large::kSmemBytes) {  // D 256: the Hopper set differs
      if (hopper) return launch_bwd<Hopper, kDropout>(params, static_cast<cudaStream_t>(stream));
    }
    return FLASHLAB_BOOL_SWITCH(large, kLargeTiles, [&] {
      using Traits = std::conditional_t<kLargeTiles, Large, Small>;
      return launch_bwd<Traits, kDropout>(params, static_cast<cudaStream_t>(stream));
    });
  });
}

}  // namespace sm80
}  // namespace flashlab
