// src/cuda/cute_check.cu — proves the toolchain: nvcc + the pinned CuTe headers + sm_90a.
//
// Not used at run time. It compiles a small CuTe kernel (layouts, a partitioned copy, and a
// Hopper warpgroup MMA atom), so a broken CUTLASS install or an nvcc that cannot build sm_90a
// fails the build early instead of in the production kernels.
#include <cute/tensor.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>

namespace flashlab {
namespace cute_check {

using namespace cute;

// Copies a (64, 64) bf16 tile through shared memory with one thread per row.
__global__ void copy_tile(const cutlass::bfloat16_t* src, cutlass::bfloat16_t* dst) {
  Tensor gS = make_tensor(make_gmem_ptr(src), make_layout(make_shape(Int<64>{}, Int<64>{}), LayoutRight{}));  // (64, 64)
  Tensor gD = make_tensor(make_gmem_ptr(dst), make_layout(make_shape(Int<64>{}, Int<64>{}), LayoutRight{}));  // (64, 64)
  __shared__ cutlass::bfloat16_t smem[64 * 64];
  Tensor sT = make_tensor(make_smem_ptr(smem), make_layout(make_shape(Int<64>{}, Int<64>{}), LayoutRight{}));  // (64, 64)
  const int row = threadIdx.x;
  if (row < 64) {
    for (int c = 0; c < 64; ++c) sT(row, c) = gS(row, c);
  }
  __syncthreads();
  if (row < 64) {
    for (int c = 0; c < 64; ++c) gD(row, c) = sT(row, c);
  }
}

// The warpgroup MMA (wgmma) atom the Hopper kernels will use: 64x64x16, bf16 in, fp32 out.
using HopperAtom = MMA_Atom<SM90_64x64x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::K>>;
static_assert(size(typename HopperAtom::ThrID{}) == 128, "a wgmma atom is issued by one warpgroup (128 threads)");

}  // namespace cute_check
}  // namespace flashlab
