// learn/kernels/forward_v0.cu — v0: standard attention, three steps through device memory.
//
//   S = scale · Q·Kᵀ      cuBLAS (tensor cores), fp32 result   (seqlen_q × seqlen_k per head)
//   P = softmax(mask(S))  one block per row: row max, row sum, LSE, P in the element type
//   O = P·V               cuBLAS, fp32 accumulation, written in the element type
//
// What it costs: S and P are materialized, O(seqlen_q · seqlen_k) bytes per head (6 bytes per
// score here), and the softmax reads S twice and writes P once: at long sequences the kernel is
// bound by memory traffic, not arithmetic. Every later version removes that traffic.
// The scratch is taken with cudaMallocAsync on p.stream per call (the learning path accepts this;
// a production kernel takes caller workspace) and covers one batch entry at a time.
#include <cmath>

#include "kernels/common.cuh"
#include "kernels/forward.h"

namespace flashlab {
namespace learn {

namespace {

constexpr int kSoftmaxThreads = 256;

// Max or sum of a block's values (every thread gets the result).
__device__ float block_reduce(float v, bool is_max, float* shared) {
  const float identity = is_max ? -INFINITY : 0.0f;
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < blockDim.x / 32 ? shared[lane] : identity;
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  __syncthreads();  // `shared` is reused by the next call
  return v;
}

// One block per score row (query i of head h): P[i, j] = exp(S[i, j] - LSE_i) for visible keys,
// 0 for masked ones; LSE_i = max + log(sum). A row that sees no key gets P = 0 and LSE = -inf, so
// O = P·V = 0 as the API requires.
template <typename T>
__global__ void softmax_rows_kernel(const float* S, T* P, FwdKernelParams p, int b) {
  __shared__ float red[32];
  const int i = blockIdx.x, h = blockIdx.y;
  const int64_t row = (int64_t(h) * p.seqlen_q + i) * p.seqlen_k;
  const float* s = S + row;
  T* prow = P + row;
  const int hi = last_visible_key(p, i);  // keys 0..hi are visible

  // Pass 1: row max and sum together (online: rescale the running sum when the max grows).
  float m = -INFINITY, l = 0.0f;
  for (int j = threadIdx.x; j <= hi; j += blockDim.x) {
    const float x = s[j];
    if (x > m) {
      l = l * expf(m - x) + 1.0f;
      m = x;
    } else {
      l += expf(x - m);
    }
  }
  const float row_max = block_reduce(m, true, red);
  const float mine = (m == -INFINITY) ? 0.0f : l * expf(m - row_max);
  const float row_sum = block_reduce(mine, false, red);
  const float lse = hi >= 0 ? row_max + logf(row_sum) : -INFINITY;

  // Pass 2: P in the element type (what the second GEMM reads).
  for (int j = threadIdx.x; j < p.seqlen_k; j += blockDim.x)
    prow[j] = ElemTraits<T>::from_float(j <= hi ? expf(s[j] - lse) : 0.0f);
  if (threadIdx.x == 0 && p.lse) p.lse[b * p.lse_batch_stride + h * p.lse_head_stride + i] = lse;
}

template <typename T>
constexpr cudaDataType_t cuda_type() {
  return ElemTraits<T>::kDType == DType::kFloat16 ? CUDA_R_16F : CUDA_R_16BF;
}

// cuBLAS is column-major; a row-major (rows × cols, leading dimension ld) matrix is its transpose.
// So S (seqlen_q × seqlen_k, row-major) is computed as Sᵀ = K·Qᵀ, and O as Oᵀ = Vᵀ·Pᵀ.
// Query heads g*group + r share kv head g: one strided-batched call per r covers all kv heads.
template <typename T>
Status run(const FwdParams& fp, cublasHandle_t handle) {
  const FwdKernelParams p = make_fwd_kernel_params(fp);
  cudaStream_t stream = static_cast<cudaStream_t>(fp.stream);
  const int64_t sq = p.seqlen_q, sk = p.seqlen_k, d = p.head_dim;
  const int64_t per_head = sq * sk;
  const int group = p.kv_group;

  float* S = nullptr;
  T* P = nullptr;
  const size_t s_bytes = size_t(p.heads_q) * per_head * sizeof(float);
  const size_t p_bytes = size_t(p.heads_q) * per_head * sizeof(T);
  if (cudaMallocAsync(reinterpret_cast<void**>(&S), s_bytes, stream) != cudaSuccess ||
      cudaMallocAsync(reinterpret_cast<void**>(&P), p_bytes, stream) != cudaSuccess) {
    cudaGetLastError();  // an allocation failure is not sticky: clear it so later checks stay clean
    if (S) cudaFreeAsync(S, stream);
    return Status(StatusCode::kOutOfMemory, "learn_v0: no device memory for S and P (" +
                                                std::to_string((s_bytes + p_bytes) >> 20) +
                                                " MiB per batch entry; v0 needs O(seqlen_q*seqlen_k))");
  }
  Status st;
  const float one = 1.0f, zero = 0.0f;
  const cudaDataType_t dt = cuda_type<T>();
  for (int b = 0; b < p.batch && st.ok(); ++b) {
    const T* q = static_cast<const T*>(p.q) + b * p.q_batch_stride;
    const T* k = static_cast<const T*>(p.k) + b * p.k_batch_stride;
    const T* v = static_cast<const T*>(p.v) + b * p.v_batch_stride;
    T* o = static_cast<T*>(p.out) + b * p.o_batch_stride;
    // 1. Sᵀ (sk × sq, ld sk) = scale · K (sk × d) · Qᵀ (d × sq)
    for (int r = 0; r < group && st.ok(); ++r) {
      st = cublas_status(
          cublasGemmStridedBatchedEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, int(sk), int(sq), int(d), &p.softmax_scale,
                                     k, dt, int(p.k_row_stride), p.k_head_stride,                      // A = K
                                     q + r * p.q_head_stride, dt, int(p.q_row_stride),
                                     group * p.q_head_stride,                                          // B = Q
                                     &zero, S + r * per_head, CUDA_R_32F, int(sk), group * per_head,  // C = S
                                     p.heads_kv, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx(S = QK^T)", __FILE__, __LINE__);
    }
    if (!st.ok()) break;
    // 2. P = softmax(S), LSE
    softmax_rows_kernel<T><<<dim3(p.seqlen_q, p.heads_q), kSoftmaxThreads, 0, stream>>>(S, P, p, b);
    st = cuda_status(cudaGetLastError(), "softmax_rows_kernel", __FILE__, __LINE__);
    // 3. Oᵀ (d × sq, ld o_row_stride) = Vᵀ (d × sk) · Pᵀ (sk × sq)
    for (int r = 0; r < group && st.ok(); ++r) {
      st = cublas_status(
          cublasGemmStridedBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, int(d), int(sq), int(sk), &one,
                                     v, dt, int(p.v_row_stride), p.v_head_stride,                  // A = V
                                     P + r * per_head, dt, int(sk), group * per_head,              // B = P
                                     &zero, o + r * p.o_head_stride, dt, int(p.o_row_stride),
                                     group * p.o_head_stride,                                      // C = O
                                     p.heads_kv, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx(O = PV)", __FILE__, __LINE__);
    }
  }
  cudaFreeAsync(P, stream);
  cudaFreeAsync(S, stream);
  FLASHLAB_RETURN_IF_ERROR(st);
  LEARN_CUDA_TRY(cudaGetLastError());
  return Status::Ok();
}

// One cuBLAS handle per host thread, created on first use: cublasCreate costs milliseconds and
// would otherwise land inside every timed call.
Status thread_handle(cublasHandle_t* out) {
  thread_local cublasHandle_t handle = nullptr;
  if (!handle) LEARN_CUBLAS_TRY(cublasCreate(&handle));
  *out = handle;
  return Status::Ok();
}

}  // namespace

Status forward_v0(const FwdParams& p) {
  cublasHandle_t handle;
  FLASHLAB_RETURN_IF_ERROR(thread_handle(&handle));
  LEARN_CUBLAS_TRY(cublasSetStream(handle, static_cast<cudaStream_t>(p.stream)));
  return LEARN_DTYPE_SWITCH(p.dtype, T, [&] { return run<T>(p, handle); });
}

}  // namespace learn
}  // namespace flashlab
