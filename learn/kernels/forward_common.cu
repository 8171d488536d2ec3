// learn/kernels/forward_common.cu — the degenerate case every version shares: no keys at all.
#include <limits>

#include "kernels/common.cuh"
#include "kernels/forward.h"

namespace flashlab {
namespace learn {

namespace {
// One thread per output element of row `row` (blockIdx.x), head blockIdx.y, batch blockIdx.z.
template <typename T>
__global__ void no_keys_kernel(FwdKernelParams p) {
  const int row = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  T* o = out_row<T>(p, b, row, h);
  for (int e = threadIdx.x; e < p.head_dim; e += blockDim.x) o[e] = ElemTraits<T>::from_float(0.0f);
  if (threadIdx.x == 0 && p.lse) p.lse[lse_index(p, b, h, row)] = -INFINITY;
}
}  // namespace

Status forward_no_keys(const FwdParams& fp) {
  const FwdKernelParams p = make_fwd_kernel_params(fp);
  cudaStream_t s = static_cast<cudaStream_t>(fp.stream);
  const dim3 grid(p.seqlen_q, p.heads_q, p.batch);
  LEARN_DTYPE_SWITCH(fp.dtype, T, [&] { no_keys_kernel<T><<<grid, 128, 0, s>>>(p); });
  LEARN_LAUNCH_TRY();
  return Status::Ok();
}

}  // namespace learn
}  // namespace flashlab
