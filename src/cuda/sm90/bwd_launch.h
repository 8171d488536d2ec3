// src/cuda/sm90/bwd_launch.h — from BwdArguments to the Hopper backward's launches on the caller's
// stream.
//
// run_bwd<dtype, head_dim>() is what the generated instantiations compile. In stream order:
//   1. common::bwd_prologue       zero dq_accum, its semaphores (deterministic) and GQA's
//                                 dk/dv_accum (atomic); LSE · log2(e) and
//                                 D = rowsum(dO ∘ O) as row_stats tiles of kBlockM rows
//                                 (bwd_workspace.h; kBlockM: bwd_kernel_traits.h, bwd_block_m)
//   2. FlashBwdKernel             dK, dV; dq_accum += dS·K          (flash_bwd_kernel.h)
//   3. BwdConvertDq               dq_accum · scale -> dQ            (epilogue_bwd.h)
//   4. common::bwd_epilogue_dkv   GQA: dK, dV slices -> the dtype outputs
// No host synchronization and no allocation: all scratch is the caller's workspace, laid out by
// common/bwd_workspace.h exactly as for cuda_sm80 (so the size does not depend on the GPU).
// Dropout never reaches it (api_sm90.cpp); head dims 129..192 (bucket 192) run the D 256 kernels
// (bwd_kernel_traits.h, BwdTraitsFor). The deterministic mode
// runs the same steps with its own main kernel (flash_bwd_kernel.h, kDeterministic); the
// prologue also zeroes the dq_accum tiles' semaphores then.
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/bwd_prepost.h"
#include "cuda/common/kernel_args.h"
#include "cuda/common/launch.h"
#include "cuda/common/variant.h"
#include "cuda/sm90/bwd_kernel_traits.h"
#include "cuda/sm90/epilogue_bwd.h"
#include "cuda/sm90/flash_bwd_kernel.h"
#include "cuda/sm90/flash_fwd_kernel.h"  // device_kernel
#include "cuda/sm90/fwd_launch.h"        // kImplName
#include "cuda/sm90/mainloop_bwd.h"

namespace flashlab {
namespace sm90 {

template <typename Traits, bool kGeneral, bool kDeterministic = false, bool kVarlen = false, bool kKeyMajor = false>
using BwdKernel = FlashBwdKernel<MainloopBwd<Traits>, common::ScoreVariant<Traits::kBlockM, Traits::kBlockN>,
                                 kGeneral, kDeterministic, kVarlen, kKeyMajor>;

// StreamingLLM sink tokens beside a left window: a key block holding sink keys is seen by every
// later query block, so its CTA runs longest, and the key-major kernel launches those CTAs first
// (flash_bwd_kernel.h cta_tile). Only where the grid has few (head, sequence) pairs: the CTAs
// running together then hold several neighbouring key blocks of each head, which share their
// query blocks' Q and dO in L2; with many pairs they hold one block of each of many heads, and
// the sharing is lost. H200 (132 SMs), window 512-1024 + 4 sink tokens, backward time against the
// plain order (docs/perf.md, session 39): 16-32 pairs 0.65-0.77, 64 pairs 0.88-0.94, 128 pairs
// 0.92 at hdim 64 but 1.07-1.08 at 128, 256 pairs 1.14. Key blocks go in gridDim.z: at most
// kMaxGridYZ of them (else the plain order).
constexpr int64_t kKeyMajorMaxPairs = 64;
inline bool key_major_order(const common::BwdArguments& a, int block_n) {
  return sink_tokens_change_mask(a.score) && !a.deterministic &&
         int64_t(a.seq.heads_q) * a.seq.batch <= kKeyMajorMaxPairs &&
         (int64_t(a.seq.seqlen_k) + block_n - 1) / block_n <= common::kMaxGridYZ;  // gridDim.z
}

// Prepares and launches one kernel struct (no launch for an empty grid).
template <typename Kernel>
Status launch_bwd_kernel(const common::BwdArguments& args, cudaStream_t stream, const char* what) {
  constexpr int kSmem = Kernel::kSharedStorageBytes;
  static_assert(kSmem <= 227 * 1024, "<= 227 KiB of shared memory (H100 / H200)");
  const typename Kernel::Params params = Kernel::to_params(args);
  const dim3 grid = Kernel::grid(params);
  if (!common::nonempty(grid)) return Status::Ok();
  FLASHLAB_RETURN_IF_ERROR(
      common::prepare_kernel<&device_kernel<Kernel>>(kSmem, kImplName, what, Kernel::kHeadDim));
  device_kernel<Kernel><<<grid, Kernel::kThreads, kSmem, stream>>>(params);
  return common::cuda_error(cudaGetLastError(), kImplName, what);
}

// One tile set (Traits) and one score kernel kind: the prologue, the main kernel (deterministic or
// not), the dQ conversion, GQA's dK / dV conversion.
template <typename Traits, bool kGeneral>
Status run_bwd_with(const common::BwdArguments& args_in, cudaStream_t stream) {
  using Element = typename Traits::Element;
  common::BwdArguments args = args_in;
  // The producer loads LSE and D as row_stats tiles of one query block (bwd_workspace.h).
  static_assert(Traits::kBlockM % common::kPrepostRows == 0 && common::kDqAccumRowAlign % Traits::kBlockM == 0,
                "row_stats tiles are whole preprocess CTAs and fit the workspace's rows");
  args.rows.row_stats_block = Traits::kBlockM;
  FLASHLAB_RETURN_IF_ERROR(
      common::bwd_prologue<Element>(args, Traits::kBlockM, Traits::kBucket, stream, kImplName));
  // Four kernels per score kind: deterministic or not, varlen (cu_seqlens) or not; the general
  // kind two more, key-major (sink blocks first: key_major_order).
  const bool varlen = args.seq.cu_seqlens_q != nullptr;
  constexpr const char* kWhat = "backward kernel";
  Status main_kernel;
  if (args.deterministic)
    main_kernel = varlen ? launch_bwd_kernel<BwdKernel<Traits, kGeneral, true, true>>(args, stream, kWhat)
                         : launch_bwd_kernel<BwdKernel<Traits, kGeneral, true>>(args, stream, kWhat);
  else if (kGeneral && key_major_order(args, Traits::kBlockN))
    main_kernel = varlen ? launch_bwd_kernel<BwdKernel<Traits, kGeneral, false, true, kGeneral>>(args, stream, kWhat)
                         : launch_bwd_kernel<BwdKernel<Traits, kGeneral, false, false, kGeneral>>(args, stream, kWhat);
  else
    main_kernel = varlen ? launch_bwd_kernel<BwdKernel<Traits, kGeneral, false, true>>(args, stream, kWhat)
                         : launch_bwd_kernel<BwdKernel<Traits, kGeneral>>(args, stream, kWhat);
  FLASHLAB_RETURN_IF_ERROR(main_kernel);
  FLASHLAB_RETURN_IF_ERROR(
      launch_bwd_kernel<BwdConvertDq<Traits>>(args, stream, "backward dQ conversion kernel"));
  return common::bwd_epilogue_dkv<Element>(args, stream, kImplName);
}

template <DType kDType, int kHeadDim>
Status run_bwd(const common::BwdArguments& args, void* stream_ptr) {
  using Element = typename common::ElementOf<kDType>::type;
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  if (args.seq.batch == 0 || args.seq.heads_q == 0) return Status::Ok();  // no rows, no descriptors
  // Softcap, ALiBi and StreamingLLM sink tokens (beside a left window) have kernels of their own
  // (flash_bwd_kernel.h, kGeneral), on 64-row query blocks at every head dim (bwd_kernel_traits.h,
  // bwd_block_m), and so has the deterministic mode (kDeterministic: ordered dQ reductions,
  // kPartial dK / dV; sink blocks ranked among a query block's adders: flash_bwd_kernel.h).
  if (common::ScoreVariant<64, 128>::general(args.score))
    return run_bwd_with<BwdTraitsFor<kHeadDim, Element, 64>, true>(args, stream);
  return run_bwd_with<BwdTraitsFor<kHeadDim, Element>, false>(args, stream);
}

}  // namespace sm90
}  // namespace flashlab
