// learn/kernels/common.cuh — device-side plumbing shared by every learning kernel (forward and
// backward): CUDA/cuBLAS error checks that return a flashlab::Status, element-type traits, the
// compile-time switches, and the one kernel-facing params struct.
//
// Library code (learn/kernels/*.cu, learn/api_*.cu) includes this file; the harness programs get it
// through learn/harness.cuh. Nothing here aborts: every failure becomes a Status.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "flashlab/flashlab.h"
#include "flashlab/mask.h"

namespace flashlab {
namespace learn {

// ---------------------------------------------------------------------------------------------
// Errors: every CUDA / cuBLAS call in library code goes through one of these.
// ---------------------------------------------------------------------------------------------
inline Status cuda_status(cudaError_t e, const char* expr, const char* file, int line) {
  if (e == cudaSuccess) return Status::Ok();
  return Status(StatusCode::kDeviceError, std::string(expr) + " failed at " + file + ":" +
                                              std::to_string(line) + ": " + cudaGetErrorName(e) +
                                              " (" + cudaGetErrorString(e) + ")");
}
inline Status cublas_status(cublasStatus_t e, const char* expr, const char* file, int line) {
  if (e == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Status(StatusCode::kDeviceError, std::string(expr) + " failed at " + file + ":" +
                                              std::to_string(line) + ": cuBLAS status " +
                                              std::to_string(static_cast<int>(e)));
}

// Return a kDeviceError Status from the enclosing function when a CUDA call fails.
#define LEARN_CUDA_TRY(expr) \
  FLASHLAB_RETURN_IF_ERROR(::flashlab::learn::cuda_status((expr), #expr, __FILE__, __LINE__))
#define LEARN_CUBLAS_TRY(expr) \
  FLASHLAB_RETURN_IF_ERROR(::flashlab::learn::cublas_status((expr), #expr, __FILE__, __LINE__))
// After a <<<...>>> launch: launch-configuration errors show up in cudaGetLastError.
#define LEARN_LAUNCH_TRY() LEARN_CUDA_TRY(cudaGetLastError())

// ---------------------------------------------------------------------------------------------
// Element types
// ---------------------------------------------------------------------------------------------
template <typename T>
struct ElemTraits;
template <>
struct ElemTraits<__nv_bfloat16> {
  static constexpr DType kDType = DType::kBFloat16;
  using Pair = __nv_bfloat162;
  __device__ static float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
  __device__ static __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
  __device__ static Pair pack(float lo, float hi) { return __floats2bfloat162_rn(lo, hi); }
};
template <>
struct ElemTraits<__half> {
  static constexpr DType kDType = DType::kFloat16;
  using Pair = __half2;
  __device__ static float to_float(__half x) { return __half2float(x); }
  __device__ static __half from_float(float x) { return __float2half_rn(x); }
  __device__ static Pair pack(float lo, float hi) { return __floats2half2_rn(lo, hi); }
};

// log2(e): kernels compute exp(x) as exp2(x * kLog2e), which is one MUFU.EX2 instruction.
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// ---------------------------------------------------------------------------------------------
// Compile-time switches: runtime flags become template parameters here and nowhere else.
// Only hdim {64, 128} x {bf16, fp16} are instantiated (CI compiles all of learn/ quickly).
// ---------------------------------------------------------------------------------------------
#define LEARN_DTYPE_SWITCH(dtype, T, ...)            \
  [&] {                                              \
    if ((dtype) == ::flashlab::DType::kFloat16) {    \
      using T = __half;                              \
      return __VA_ARGS__();                          \
    } else {                                         \
      using T = __nv_bfloat16;                       \
      return __VA_ARGS__();                          \
    }                                                \
  }()
#define LEARN_HDIM_SWITCH(hdim, kHeadDim, ...) \
  [&] {                                        \
    if ((hdim) == 64) {                        \
      constexpr int kHeadDim = 64;             \
      return __VA_ARGS__();                    \
    } else {                                   \
      constexpr int kHeadDim = 128;            \
      return __VA_ARGS__();                    \
    }                                          \
  }()
#define LEARN_BOOL_SWITCH(cond, kName, ...) \
  [&] {                                     \
    if (cond) {                             \
      constexpr bool kName = true;          \
      return __VA_ARGS__();                 \
    } else {                                \
      constexpr bool kName = false;         \
      return __VA_ARGS__();                 \
    }                                       \
  }()

// ---------------------------------------------------------------------------------------------
// The problem's shape as every kernel sees it: the first fields of the forward kernels'
// FwdKernelParams and of the backward kernels' BwdArgs (kernels/backward_common.cuh).
// ---------------------------------------------------------------------------------------------
struct KernelShape {
  int batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
  float scale_log2;  // softmax_scale * log2(e): exp(s - m) = exp2(raw * scale_log2 - ...)
  bool causal;       // bottom-right aligned (the only alignment the learning kernels take)
};

inline KernelShape make_kernel_shape(const AttentionConfig& p) {
  KernelShape k;
  k.batch = static_cast<int>(p.batch);
  k.heads_q = static_cast<int>(p.heads_q);
  k.heads_kv = static_cast<int>(p.heads_kv);
  k.seqlen_q = static_cast<int>(p.seqlen_q);
  k.seqlen_k = static_cast<int>(p.seqlen_k);
  k.head_dim = static_cast<int>(p.head_dim);
  k.scale_log2 = p.softmax_scale * kLog2e;
  k.causal = p.causal;
  return k;
}

// ---------------------------------------------------------------------------------------------
// The kernel-facing forward params: what every forward kernel needs, nothing more. Strides in
// elements; the last dimension is contiguous (the API guarantees it).
// ---------------------------------------------------------------------------------------------
struct FwdKernelParams : KernelShape {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  float* lse;  // may be null
  int64_t q_batch_stride, q_row_stride, q_head_stride;
  int64_t k_batch_stride, k_row_stride, k_head_stride;
  int64_t v_batch_stride, v_row_stride, v_head_stride;
  int64_t o_batch_stride, o_row_stride, o_head_stride;
  int64_t lse_batch_stride, lse_head_stride;
  int kv_group;          // heads_q / heads_kv: query head h reads kv head h / kv_group
  float softmax_scale;   // s = softmax_scale * q.k
  int causal_shift;      // seqlen_k - seqlen_q: query i sees key j iff j <= i + causal_shift
};

inline FwdKernelParams make_fwd_kernel_params(const FwdParams& p) {
  FwdKernelParams k;
  static_cast<KernelShape&>(k) = make_kernel_shape(p);
  k.q = p.q.ptr;
  k.k = p.k.ptr;
  k.v = p.v.ptr;
  k.out = p.out.ptr;
  k.lse = p.lse;
  k.q_batch_stride = p.q.batch_stride;
  k.q_row_stride = p.q.row_stride;
  k.q_head_stride = p.q.head_stride;
  k.k_batch_stride = p.k.batch_stride;
  k.k_row_stride = p.k.row_stride;
  k.k_head_stride = p.k.head_stride;
  k.v_batch_stride = p.v.batch_stride;
  k.v_row_stride = p.v.row_stride;
  k.v_head_stride = p.v.head_stride;
  k.o_batch_stride = p.out.batch_stride;
  k.o_row_stride = p.out.row_stride;
  k.o_head_stride = p.out.head_stride;
  k.lse_batch_stride = p.lse_batch_stride;
  k.lse_head_stride = p.lse_head_stride;
  k.kv_group = static_cast<int>(p.heads_q / p.heads_kv);
  k.softmax_scale = p.softmax_scale;
  k.causal_shift = static_cast<int>(p.seqlen_k - p.seqlen_q);
  return k;
}

// Last visible key of query row i under the bottom-right causal mask (seqlen_k - 1 without the
// mask). A row whose bound is < 0 sees no key: it outputs 0 and LSE = -inf.
__host__ __device__ inline int last_visible_key(const FwdKernelParams& p, int i) {
  const int hi = p.causal ? i + p.causal_shift : p.seqlen_k - 1;
  return hi < p.seqlen_k - 1 ? hi : p.seqlen_k - 1;
}

// Where the forward kernels write: row i of query head h of batch b in O, and its LSE entry.
template <typename T>
__device__ __forceinline__ T* out_row(const FwdKernelParams& p, int b, int i, int h) {
  return static_cast<T*>(p.out) + b * p.o_batch_stride + int64_t(i) * p.o_row_stride + h * p.o_head_stride;
}
__device__ __forceinline__ int64_t lse_index(const FwdKernelParams& p, int b, int h, int i) {
  return b * p.lse_batch_stride + h * p.lse_head_stride + i;
}

// Block-level ceil division, used for grid sizes.
__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Sets `kernel`'s dynamic shared memory limit to `smem` bytes (needed above the 48 KiB default),
// then launches it with `args` on `stream`. Launch-configuration errors come back as a Status.
template <typename... KernelArgs, typename... Args>
Status launch_with_smem(void (*kernel)(KernelArgs...), dim3 grid, int threads, size_t smem,
                        cudaStream_t stream, const Args&... args) {
  LEARN_CUDA_TRY(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  kernel<<<grid, threads, smem, stream>>>(args...);
  LEARN_LAUNCH_TRY();
  return Status::Ok();
}

}  // namespace learn
}  // namespace flashlab
