// learn/kernels/backward_v0.cu — version 0 of the backward pass: standard (unfused) attention.
//
// Every intermediate of the math in backward_common.cuh is materialized in device memory, one
// (batch, kv head) group at a time: the O(seqlen_q · seqlen_k) matrices S, dP (fp32) and P, dS
// (16-bit, so cuBLAS can use the tensor cores for the products that consume them). The five matrix
// products run in cuBLAS; two small kernels do the elementwise work. It is the baseline every
// fused version is measured against, and a second opinion on the math that is easy to read.
//
//   S  = Q·Kᵀ            cuBLAS (fp32 out)           one batched call for the group's heads
//   dP = dO·Vᵀ           cuBLAS (fp32 out)
//   P  = exp2(S·c·log2e − LSE·log2e), dS = P∘(dP − D)     bwd_v0_softmax_grad_kernel
//   dV += Pᵀ·dO, dK += dSᵀ·Q                          cuBLAS, fp32 accumulators (GQA: summed over
//                                                      the heads of the group), then scaled+rounded
//   dQ = c·dS·K          cuBLAS, written straight into dq
//
// Scratch: 12 · group · seqlen_q · seqlen_k bytes, allocated with cudaMallocAsync on the stream and
// freed after the call (acceptable for a learning baseline: the point of v1+ is to not need it).
#include <cublas_v2.h>

#include <mutex>
#include <unordered_map>

#include "kernels/backward_common.cuh"

namespace flashlab {
namespace learn_bwd {
namespace {

// ---- cuBLAS: one handle per device, created on first use (creation costs milliseconds).
Status get_handle(cudaStream_t stream, cublasHandle_t* out) {
  static std::mutex mu;
  static std::unordered_map<int, cublasHandle_t> handles;
  int dev = 0;
  LEARN_CUDA_TRY(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  auto it = handles.find(dev);
  if (it == handles.end()) {
    cublasHandle_t h = nullptr;
    LEARN_CUBLAS_TRY(cublasCreate(&h));
    it = handles.emplace(dev, h).first;
  }
  LEARN_CUBLAS_TRY(cublasSetStream(it->second, stream));
  *out = it->second;
  return Status::Ok();
}

// Row-major C(m×n) = alpha·op(A)(m×k)·op(B)(k×n) + beta·C, batched with element strides.
// cuBLAS is column-major: a row-major matrix is its transpose in column-major, so we ask for
// Cᵀ = op(B)ᵀ·op(A)ᵀ, i.e. swap the operands and keep the transpose flags.
struct Mat {
  const void* ptr;
  cudaDataType type;
  int64_t ld;      // row stride (elements)
  int64_t stride;  // between batch entries (elements), 0 = shared
};
Status gemm_rm(cublasHandle_t h, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, Mat A,
               Mat B, float beta, void* C, cudaDataType ct, int64_t ldc, int64_t stride_c, int batch) {
  const int64_t big = 1ll << 31;
  if (m >= big || n >= big || k >= big || A.ld >= big || B.ld >= big || ldc >= big)
    return Status::Unsupported("learn_v0 backward: a matrix dimension or row stride exceeds 2^31");
  LEARN_CUBLAS_TRY(cublasGemmStridedBatchedEx(
      h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
      static_cast<int>(m), static_cast<int>(k), &alpha, B.ptr, B.type, static_cast<int>(B.ld), B.stride,
      A.ptr, A.type, static_cast<int>(A.ld), A.stride, &beta, C, ct, static_cast<int>(ldc), stride_c, batch,
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return Status::Ok();
}

// P = exp(c·S − LSE) (0 where masked), dS = P∘(dP − D), for the `group` query heads of kv head hk.
// One thread per element; S and dP are (group, seqlen_q, seqlen_k) fp32, P and dS the same in T.
template <typename T>
__global__ void bwd_v0_softmax_grad_kernel(BwdArgs a, int b, int hk, const float* S, const float* dP,
                                           T* P, T* dS) {
  const int64_t per_head = static_cast<int64_t>(a.seqlen_q) * a.seqlen_k;
  const int64_t total = per_head * a.group;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int g = static_cast<int>(e / per_head);
    const int i = static_cast<int>((e % per_head) / a.seqlen_k);
    const int j = static_cast<int>(e % a.seqlen_k);
    const int64_t stat = row_stat_index(a, b, hk * a.group + g, i);
    float p = 0.0f;
    if (visible(a, i, j)) p = exp2f(S[e] * a.scale_log2 - a.lse2[stat]);  // lse2 = +inf: p = 0
    P[e] = from_float<T>(p);
    dS[e] = from_float<T>(p * (dP[e] - a.dvec[stat]));
  }
}

// dk = c·dk_acc, dv = dv_acc for kv head hk of batch entry b (fp32 (seqlen_k, head_dim) → T).
template <typename T>
__global__ void bwd_v0_store_dkdv_kernel(BwdArgs a, int b, int hk, const float* dk_acc, const float* dv_acc) {
  const int64_t total = static_cast<int64_t>(a.seqlen_k) * a.head_dim;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int j = static_cast<int>(e / a.head_dim), d = static_cast<int>(e % a.head_dim);
    static_cast<T*>(a.dk)[elem_index(a.dk_st, b, j, hk) + d] = from_float<T>(a.scale * dk_acc[e]);
    static_cast<T*>(a.dv)[elem_index(a.dv_st, b, j, hk) + d] = from_float<T>(dv_acc[e]);
  }
}

unsigned grid_for(int64_t n) { return static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 65536)); }

// Scratch layout of one call: lse2 | dvec | S | dP | P | dS | dk_acc | dv_acc.
struct V0Scratch {
  int64_t bytes = 0;
  int64_t off_lse2, off_dvec, off_s, off_dp, off_p, off_ds, off_dk, off_dv;
};
V0Scratch plan_scratch(const BwdParams& p) {
  auto a256 = [](int64_t x) { return (x + 255) / 256 * 256; };
  const int64_t rows_pad = (p.seqlen_q + kRowPad - 1) / kRowPad * kRowPad;
  const int64_t stats = a256(p.batch * p.heads_q * rows_pad * 4);
  const int64_t mat = p.heads_q / p.heads_kv * p.seqlen_q * p.seqlen_k;
  const int64_t acc = a256(p.seqlen_k * p.head_dim * 4);
  V0Scratch s;
  s.off_lse2 = 0;
  s.off_dvec = stats;
  s.off_s = 2 * stats;
  s.off_dp = s.off_s + a256(mat * 4);
  s.off_p = s.off_dp + a256(mat * 4);
  s.off_ds = s.off_p + a256(mat * 2);
  s.off_dk = s.off_ds + a256(mat * 2);
  s.off_dv = s.off_dk + acc;
  s.bytes = s.off_dv + acc;
  return s;
}

template <typename T>
Status run_v0(const BwdParams& p, BwdArgs a, char* scratch, const V0Scratch& plan, cudaStream_t stream) {
  const cudaDataType t16 = a.dtype == DType::kBFloat16 ? CUDA_R_16BF : CUDA_R_16F;
  cublasHandle_t h = nullptr;
  FLASHLAB_RETURN_IF_ERROR(get_handle(stream, &h));
  a.lse2 = reinterpret_cast<float*>(scratch + plan.off_lse2);
  a.dvec = reinterpret_cast<float*>(scratch + plan.off_dvec);
  a.dq_acc = nullptr;  // v0 writes dq directly: the preprocessing only fills D and lse2
  FLASHLAB_RETURN_IF_ERROR(launch_preprocess(a, stream));

  float* S = reinterpret_cast<float*>(scratch + plan.off_s);
  float* dP = reinterpret_cast<float*>(scratch + plan.off_dp);
  T* P = reinterpret_cast<T*>(scratch + plan.off_p);
  T* dS = reinterpret_cast<T*>(scratch + plan.off_ds);
  float* dk_acc = reinterpret_cast<float*>(scratch + plan.off_dk);
  float* dv_acc = reinterpret_cast<float*>(scratch + plan.off_dv);
  const int64_t sq = a.seqlen_q, sk = a.seqlen_k, hd = a.head_dim, mat = sq * sk;
  const int G = a.group;
  const size_t es = sizeof(T);

  for (int b = 0; b < a.batch; ++b) {
    for (int hk = 0; hk < a.heads_kv; ++hk) {
      const int h0 = hk * G;  // first query head of the group
      const char* q0 = static_cast<const char*>(a.q) + elem_index(a.q_st, b, 0, h0) * es;
      const char* do0 = static_cast<const char*>(a.dout) + elem_index(a.do_st, b, 0, h0) * es;
      const char* k0 = static_cast<const char*>(a.k) + elem_index(a.k_st, b, 0, hk) * es;
      const char* v0 = static_cast<const char*>(a.v) + elem_index(a.v_st, b, 0, hk) * es;
      char* dq0 = static_cast<char*>(a.dq) + elem_index(a.dq_st, b, 0, h0) * es;
      const Mat Kmat{k0, t16, a.k_st.row, 0}, Vmat{v0, t16, a.v_st.row, 0};

      // S = Q·Kᵀ and dP = dO·Vᵀ for all heads of the group (K, V shared: batch stride 0).
      FLASHLAB_RETURN_IF_ERROR(gemm_rm(h, false, true, sq, sk, hd, 1.0f, Mat{q0, t16, a.q_st.row, a.q_st.head},
                                       Kmat, 0.0f, S, CUDA_R_32F, sk, mat, G));
      FLASHLAB_RETURN_IF_ERROR(gemm_rm(h, false, true, sq, sk, hd, 1.0f, Mat{do0, t16, a.do_st.row, a.do_st.head},
                                       Vmat, 0.0f, dP, CUDA_R_32F, sk, mat, G));
      bwd_v0_softmax_grad_kernel<T><<<grid_for(mat * G), 256, 0, stream>>>(a, b, hk, S, dP, P, dS);
      LEARN_LAUNCH_TRY();

      // dV = Σ_g P_gᵀ·dO_g, dK = Σ_g dS_gᵀ·Q_g (fp32 accumulation over the group).
      for (int g = 0; g < G; ++g) {
        const float beta = g == 0 ? 0.0f : 1.0f;
        const Mat Pg{P + g * mat, t16, sk, 0}, dSg{dS + g * mat, t16, sk, 0};
        const Mat dOg{do0 + g * a.do_st.head * es, t16, a.do_st.row, 0};
        const Mat Qg{q0 + g * a.q_st.head * es, t16, a.q_st.row, 0};
        FLASHLAB_RETURN_IF_ERROR(gemm_rm(h, true, false, sk, hd, sq, 1.0f, Pg, dOg, beta, dv_acc, CUDA_R_32F, hd, 0, 1));
        FLASHLAB_RETURN_IF_ERROR(gemm_rm(h, true, false, sk, hd, sq, 1.0f, dSg, Qg, beta, dk_acc, CUDA_R_32F, hd, 0, 1));
      }
      bwd_v0_store_dkdv_kernel<T><<<grid_for(sk * hd), 256, 0, stream>>>(a, b, hk, dk_acc, dv_acc);
      LEARN_LAUNCH_TRY();

      // dQ_g = c·dS_g·K, written in the output's own layout and type.
      FLASHLAB_RETURN_IF_ERROR(gemm_rm(h, false, false, sq, hd, sk, a.scale, Mat{dS, t16, sk, mat}, Kmat, 0.0f,
                                       dq0, t16, a.dq_st.row, a.dq_st.head, G));
    }
  }
  return Status::Ok();
}

}  // namespace

Status backward_v0(const BwdParams& p) {
  cudaStream_t stream = static_cast<cudaStream_t>(p.stream);
  const BwdArgs a = make_args(p);
  const V0Scratch plan = plan_scratch(p);
  void* scratch = nullptr;
  const cudaError_t e = cudaMallocAsync(&scratch, plan.bytes, stream);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return Status(StatusCode::kOutOfMemory,
                  "learn_v0 backward: cannot allocate " + std::to_string(plan.bytes) + " bytes of O(seqlen²) scratch");
  }
  LEARN_CUDA_TRY(e);
  const Status st = a.dtype == DType::kBFloat16
                        ? run_v0<__nv_bfloat16>(p, a, static_cast<char*>(scratch), plan, stream)
                        : run_v0<__half>(p, a, static_cast<char*>(scratch), plan, stream);
  const cudaError_t fe = cudaFreeAsync(scratch, stream);  // free even when a step failed
  FLASHLAB_RETURN_IF_ERROR(st);
  LEARN_CUDA_TRY(fe);
  return Status::Ok();
}

int64_t v0_scratch_bytes(const BwdParams& p) { return plan_scratch(p).bytes; }

}  // namespace learn_bwd
}  // namespace flashlab
