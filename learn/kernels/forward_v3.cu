// learn/kernels/forward_v3.cu — v3: the two products on tensor cores (mma.sync m16n8k16).
//
// Changes over v2: same FlashAttention-2 loop, but S = Q·Kᵀ and O = P·V run as warp-wide
// mma.sync instructions (bf16/fp16 in, fp32 accumulate) instead of scalar FFMA:
//   - 4 warps per block, each owns 16 of the 64 query rows; a warp's Q rows are loaded once into
//     registers as A fragments (ldmatrix.x4) and reused for every K tile;
//   - K fragments come from shared memory with ldmatrix.x4 (rows of K are the columns of Kᵀ, so no
//     transpose is needed), V fragments with ldmatrix.x4.trans;
//   - the online softmax runs directly on the S accumulators (each lane holds 2 rows × 2 columns per
//     8-column tile; a row's max/sum is a 4-lane shuffle), and P is converted in registers into the
//     A operand of P·V — it never touches shared memory (v2 staged P through sP).
// Shared-memory tiles are stored row-major exactly as in device memory, which makes every
// ldmatrix an 8-way bank conflict (the 8 row addresses of an 8×8 matrix are 128 or 256 bytes apart:
// the same banks). v4 swizzles the layout and removes them; `ncu` shows the difference
// (l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum). Loads are synchronous here.
#include <cmath>

#include "kernels/common.cuh"
#include "kernels/forward.h"
#include "kernels/mma.cuh"

namespace flashlab {
namespace learn {

namespace {

constexpr int kWarps = 4, kThreads = kWarps * 32;
constexpr int kBr = 16 * kWarps;  // 64 query rows per block
constexpr int kBc = 64;           // keys per tile

// Copies `rows` rows (the first `valid` real, the rest zero) of kD elements from device memory to a
// dense row-major shared tile: 16-byte loads, consecutive threads on consecutive 16-byte chunks.
template <typename T, int kD>
__device__ void load_tile(T* dst, const T* src, int64_t stride, int rows, int valid) {
  constexpr int kChunks = kD / 8;
  for (int idx = threadIdx.x; idx < rows * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = idx % kChunks;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (r < valid) val = *reinterpret_cast<const uint4*>(src + r * stride + c * 8);
    *reinterpret_cast<uint4*>(dst + r * kD + c * 8) = val;
  }
}

template <typename T, int kD>
__global__ void __launch_bounds__(kThreads) fa2_mma_kernel(FwdKernelParams p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);  // [kBr][kD]
  T* sK = sQ + kBr * kD;                   // [kBc][kD]
  T* sV = sK + kBc * kD;                   // [kBc][kD]
  const int i0 = blockIdx.x * kBr, h = blockIdx.y, b = blockIdx.z, hk = h / p.kv_group;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;  // this lane's row in an 8-row group, and column pair

  const T* q = static_cast<const T*>(p.q) + b * p.q_batch_stride + int64_t(i0) * p.q_row_stride + h * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + b * p.k_batch_stride + hk * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + b * p.v_batch_stride + hk * p.v_head_stride;

  // Q: device memory -> shared -> this warp's A fragments, once.
  load_tile<T, kD>(sQ, q, p.q_row_stride, kBr, min(kBr, p.seqlen_q - i0));
  __syncthreads();
  uint32_t qf[kD / 16][4];  // (16 rows, kD) as kD/16 k-steps of A fragments
#pragma unroll
  for (int ks = 0; ks < kD / 16; ++ks)
    ldmatrix_x4(qf[ks], sQ + (warp * 16 + lane % 16) * kD + ks * 16 + (lane / 16) * 8);

  float o[kD / 8][4];  // (16 rows, kD) accumulators: kD/8 tiles of 8 columns
#pragma unroll
  for (int n = 0; n < kD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // rows g and g + 8 (log2 domain)
  const int row0 = i0 + warp * 16 + g;
  const int hi[2] = {last_visible_key(p, row0), last_visible_key(p, row0 + 8)};

  for (int j0 = 0; j0 < p.seqlen_k; j0 += kBc) {
    __syncthreads();  // every warp is done with the previous sK, sV
    const int valid = min(kBc, p.seqlen_k - j0);
    load_tile<T, kD>(sK, k + int64_t(j0) * p.k_row_stride, p.k_row_stride, kBc, valid);
    load_tile<T, kD>(sV, v + int64_t(j0) * p.v_row_stride, p.v_row_stride, kBc, valid);
    __syncthreads();

    // S = Q · Kᵀ: (16, kBc) per warp = kBc/8 accumulator tiles.
    float s[kBc / 8][4];
#pragma unroll
    for (int n = 0; n < kBc / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks)
#pragma unroll
      for (int np = 0; np < kBc / 16; ++np) {
        uint32_t kf[4];  // B fragments of key tiles 2np and 2np+1
        ldmatrix_x4(kf, sK + (np * 16 + lane % 8 + (lane / 16) * 8) * kD + ks * 16 + ((lane / 8) % 2) * 8);
        mma_16816<T>(s[2 * np], qf[ks], kf[0], kf[1]);
        mma_16816<T>(s[2 * np + 1], qf[ks], kf[2], kf[3]);
      }

    // Online softmax on the accumulators. Element (n, e) is row g + 8*(e/2), key j0 + 8n + 2t + e%2.
    float m_tile[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kBc / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = j0 + 8 * n + 2 * t + (e % 2);
        s[n][e] = j <= hi[e / 2] ? s[n][e] * p.scale_log2 : -INFINITY;
        m_tile[e / 2] = fmaxf(m_tile[e / 2], s[n][e]);
      }
    float alpha[2], m_use[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      m_tile[r] = fmaxf(m_tile[r], __shfl_xor_sync(0xffffffffu, m_tile[r], 1));  // the 4 lanes of a row
      m_tile[r] = fmaxf(m_tile[r], __shfl_xor_sync(0xffffffffu, m_tile[r], 2));
      const float m_new = fmaxf(m[r], m_tile[r]);
      m_use[r] = m_new == -INFINITY ? 0.0f : m_new;  // no visible key yet: keep NaN out of exp2
      alpha[r] = fast_exp2(m[r] - m_use[r]);
      m[r] = m_new;
      l[r] *= alpha[r];
    }
#pragma unroll
    for (int n = 0; n < kBc / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[n][e] = fast_exp2(s[n][e] - m_use[e / 2]);
        l[e / 2] += s[n][e];  // per-lane partial sums; the 4 lanes are added in the epilogue
      }
#pragma unroll
    for (int n = 0; n < kD / 8; ++n) {
      o[n][0] *= alpha[0];
      o[n][1] *= alpha[0];
      o[n][2] *= alpha[1];
      o[n][3] *= alpha[1];
    }

    // O += P · V. P's accumulator tiles 2kk, 2kk+1 are the A fragment of key step kk.
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk) {
      const uint32_t pa[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]), pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                              pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < kD / 16; ++dp) {
        uint32_t vf[4];  // B fragments of dim tiles 2dp and 2dp+1 (V transposed by ldmatrix)
        ldmatrix_x4_trans(vf, sV + (kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * kD + dp * 16 + (lane / 16) * 8);
        mma_16816<T>(o[2 * dp], pa, vf[0], vf[1]);
        mma_16816<T>(o[2 * dp + 1], pa, vf[2], vf[3]);
      }
    }
  }

  // Epilogue: finish the row sums across the 4 lanes of each row, normalize, write O and LSE.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = row0 + 8 * r;
    if (i >= p.seqlen_q) continue;
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    T* out = out_row<T>(p, b, i, h);
#pragma unroll
    for (int n = 0; n < kD / 8; ++n)
      *reinterpret_cast<uint32_t*>(out + 8 * n + 2 * t) = pack2<T>(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
    if (t == 0 && p.lse) p.lse[lse_index(p, b, h, i)] = l[r] > 0.0f ? (m[r] + log2f(l[r])) * kLn2 : -INFINITY;
  }
}

template <typename T, int kD>
Status launch(const FwdParams& fp) {
  const FwdKernelParams p = make_fwd_kernel_params(fp);
  constexpr int kSmem = (kBr + 2 * kBc) * kD * sizeof(T);  // D = 128: 48 KiB
  const dim3 grid(ceil_div(p.seqlen_q, kBr), p.heads_q, p.batch);
  return launch_with_smem(fa2_mma_kernel<T, kD>, grid, kThreads, kSmem, static_cast<cudaStream_t>(fp.stream),
                          p);
}

}  // namespace

Status forward_v3(const FwdParams& p) {
  return LEARN_DTYPE_SWITCH(p.dtype, T, [&] {
    return LEARN_HDIM_SWITCH(p.head_dim, kD, [&] { return launch<T, kD>(p); });
  });
}

}  // namespace learn
}  // namespace flashlab
