// src/cuda/sm80/kernel_pieces.h — what every sm80 kernel struct is made of.
//
// A kernel is templated on its pieces — Mainloop, Epilogue, TileScheduler, Variant, Dropout — and
// its Params is one member per piece, each built by that piece's to_params() from the call's
// architecture-neutral arguments (the kernel's own to_params() says which argument goes to which
// piece: the forward's and the backward's differ). The forward (flash_fwd_kernel.h) and the three
// backward kernels (flash_bwd_kernel.h) derive from this; device_kernel<Kernel> is their __global__.
#pragma once

namespace flashlab {
namespace sm80 {

template <typename Mainloop_, typename Epilogue_, typename TileScheduler_, typename Variant_,
          typename Dropout_>
struct KernelPieces {
  using Mainloop = Mainloop_;
  using Epilogue = Epilogue_;
  using TileScheduler = TileScheduler_;
  using Variant = Variant_;
  using Dropout = Dropout_;
  using Traits = typename Mainloop::Traits;
  using Element = typename Traits::Element;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr int kThreads = Traits::kNThreads;
  static constexpr int kMinBlocksPerSm = 1;

  struct Params {
    typename TileScheduler::Params scheduler;
    typename Mainloop::Params mainloop;
    typename Variant::Params variant;
    typename Dropout::Params dropout;
    typename Epilogue::Params epilogue;
  };
};

// The __global__ of every sm80 kernel struct: the parameters stay in the constant bank
// (__grid_constant__: pieces hold references into them), the dynamic shared memory is the
// kernel's SharedStorage.
template <typename Kernel>
__global__ void __launch_bounds__(Kernel::kThreads, Kernel::kMinBlocksPerSm)
    device_kernel(__grid_constant__ const typename Kernel::Params params) {
  extern __shared__ __align__(128) char smem[];
  Kernel{}(params, *reinterpret_cast<typename Kernel::SharedStorage*>(smem));
}

}  // namespace sm80
}  // namespace flashlab
