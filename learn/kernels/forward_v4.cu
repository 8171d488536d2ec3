// learn/kernels/forward_v4.cu — v4: pipelined tensor-core FlashAttention-2.
//
// Changes over v3 (same mma.sync / ldmatrix arithmetic and register-resident P):
//   1. cp.async, two stages: K/V tile j+1 is copied global -> shared by the copy engine of the SM
//      (no registers, no stall) while the warps compute on tile j. v3 waited for every load.
//   2. XOR swizzle: the 16-byte chunk c of shared row r is stored at chunk c ^ (r % 8). The 8 row
//      addresses of every ldmatrix then fall into 8 different bank groups: no bank conflicts
//      (v3's dense rows made every ldmatrix an 8-way conflict).
//   3. Causal block skipping: a Q tile stops at the last K tile that holds a visible key, and only
//      tiles that cross the diagonal (or the end of the sequence) pay for the mask; the others take
//      a mask-free instantiation of the same code. Causal work halves.
//   4. 8 warps, 128 query rows per block: each K/V tile in shared memory feeds twice as many rows
//      (half the shared-memory and L2 traffic per FLOP of v3); causal Q tiles are issued longest
//      first so the last wave is not one long tile.
//   5. 128-bit global accesses: loads are 16-byte cp.async; O is staged through shared memory (in
//      the swizzled layout) so that it is written with 16-byte coalesced stores.
//   6. The softmax scale is folded into the exponent: exp2(s·c − m·c) is one FFMA + one MUFU.EX2.
#include <cmath>

#include "kernels/common.cuh"
#include "kernels/forward.h"
#include "kernels/mma.cuh"

namespace flashlab {
namespace learn {

namespace {

// Tile sizes: why these.
//   kWarps 8 / kBr 128: 16 rows per warp keeps Q (kD/16 × 4 regs), S (32 regs) and O (kD/2 regs)
//     in registers without spilling at kD = 128; 8 warps share each K/V tile.
//   kBc 64: S per warp is 16 × 64 (32 fp32 registers); larger doubles S and spills at kD = 128.
//   kStages 2: one tile computing, one landing; smem = (128 + 2·2·64)·kD·2 B = 96 KiB at kD = 128.
constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kBr = 16 * kWarps;
constexpr int kBc = 64;
constexpr int kStages = 2;

// Element offset of (row r, column c) in a swizzled tile with kD columns (kD/8 chunks of 16 B).
template <int kD>
__device__ __forceinline__ int swz(int r, int c) {
  return r * kD + ((((c >> 3) ^ (r & 7))) << 3) + (c & 7);
}

// Issues cp.async copies of `rows` rows of a (rows × kD) tile into swizzled shared memory. Rows at
// or past `valid` are zero-filled (src-size 0) from a safe address.
template <typename T, int kD>
__device__ __forceinline__ void issue_tile(T* dst, const T* src, int64_t stride, int rows, int valid) {
  constexpr int kChunks = kD / 8;
  for (int idx = threadIdx.x; idx < rows * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = (idx % kChunks) * 8;
    const bool ok = r < valid;
    cp_async_16(dst + swz<kD>(r, c), ok ? src + r * stride + c : src, ok);
  }
}

// One K/V tile: S = Q·Kᵀ, mask (only when kMask), online softmax, O += P·V.
template <typename T, int kD, bool kMask>
__device__ __forceinline__ void attend_tile(const FwdKernelParams& p, const uint32_t (&qf)[kD / 16][4],
                                            const T* sK, const T* sV, int j0, const int (&hi)[2],
                                            float (&o)[kD / 8][4], float (&m)[2], float (&l)[2]) {
  const int lane = threadIdx.x % 32, t = lane % 4;
  float s[kBc / 8][4];
#pragma unroll
  for (int n = 0; n < kBc / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < kD / 16; ++ks)
#pragma unroll
    for (int np = 0; np < kBc / 16; ++np) {
      uint32_t kf[4];
      ldmatrix_x4(kf, sK + swz<kD>(np * 16 + lane % 8 + (lane / 16) * 8, ks * 16 + ((lane / 8) % 2) * 8));
      mma_16816<T>(s[2 * np], qf[ks], kf[0], kf[1]);
      mma_16816<T>(s[2 * np + 1], qf[ks], kf[2], kf[3]);
    }

  // Row max of the raw scores (scale > 0, so max commutes with scaling).
  float m_tile[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < kBc / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (kMask && j0 + 8 * n + 2 * t + (e % 2) > hi[e / 2]) s[n][e] = -INFINITY;
      m_tile[e / 2] = fmaxf(m_tile[e / 2], s[n][e]);
    }
  float neg_m_scaled[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    m_tile[r] = fmaxf(m_tile[r], __shfl_xor_sync(0xffffffffu, m_tile[r], 1));
    m_tile[r] = fmaxf(m_tile[r], __shfl_xor_sync(0xffffffffu, m_tile[r], 2));
    const float m_new = fmaxf(m[r], m_tile[r]);
    const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // nothing visible yet: P = 0, no NaN
    const float alpha = fast_exp2((m[r] - m_use) * p.scale_log2);
    m[r] = m_new;
    l[r] *= alpha;
#pragma unroll
    for (int n = 0; n < kD / 8; ++n) {
      o[n][2 * r] *= alpha;
      o[n][2 * r + 1] *= alpha;
    }
    neg_m_scaled[r] = -m_use * p.scale_log2;
  }
#pragma unroll
  for (int n = 0; n < kBc / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[n][e] = fast_exp2(fmaf(s[n][e], p.scale_log2, neg_m_scaled[e / 2]));
      l[e / 2] += s[n][e];
    }

#pragma unroll
  for (int kk = 0; kk < kBc / 16; ++kk) {
    const uint32_t pa[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]), pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                            pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
    for (int dp = 0; dp < kD / 16; ++dp) {
      uint32_t vf[4];
      ldmatrix_x4_trans(vf, sV + swz<kD>(kk * 16 + lane % 8 + ((lane / 8) % 2) * 8, dp * 16 + (lane / 16) * 8));
      mma_16816<T>(o[2 * dp], pa, vf[0], vf[1]);
      mma_16816<T>(o[2 * dp + 1], pa, vf[2], vf[3]);
    }
  }
}

template <typename T, int kD>
__global__ void __launch_bounds__(kThreads, 1) fa2_pipelined_kernel(FwdKernelParams p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  // Shared memory: sQ [kBr][kD], then per stage sK [kBc][kD] and sV [kBc][kD], all swizzled.
  // sQ is reused to stage O in the epilogue. (Stage pointers are computed, not kept in an array:
  // a runtime-indexed array would live in local memory.)
  T* sQ = reinterpret_cast<T*>(smem_raw);
  auto sK = [&](int st) { return sQ + kBr * kD + st * 2 * kBc * kD; };
  auto sV = [&](int st) { return sQ + kBr * kD + st * 2 * kBc * kD + kBc * kD; };
  // Longest causal Q tiles first (the last rows see the most keys).
  const int qb = gridDim.x - 1 - blockIdx.x;
  const int i0 = qb * kBr, h = blockIdx.y, b = blockIdx.z, hk = h / p.kv_group;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;

  const T* q = static_cast<const T*>(p.q) + b * p.q_batch_stride + int64_t(i0) * p.q_row_stride + h * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + b * p.k_batch_stride + hk * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + b * p.v_batch_stride + hk * p.v_head_stride;

  // Which K tiles this Q tile needs: all, or (causal) up to the one holding the last row's last key.
  const int last_key = p.causal ? min(p.seqlen_k - 1, i0 + kBr - 1 + p.causal_shift) : p.seqlen_k - 1;
  const int n_tiles = last_key < 0 ? 0 : last_key / kBc + 1;
  // Tiles from here on may hold a masked key for some row: past the first row's diagonal or past seqlen_k.
  const int first_key_masked = p.causal ? min(i0 + p.causal_shift + 1, p.seqlen_k) : p.seqlen_k;

  const int row0 = i0 + warp * 16 + g;
  const int hi[2] = {last_visible_key(p, row0), last_visible_key(p, row0 + 8)};
  float o[kD / 8][4];
#pragma unroll
  for (int n = 0; n < kD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // raw-score max, sum of exp

  // Prologue: Q and the first K/V tile in one cp.async group.
  issue_tile<T, kD>(sQ, q, p.q_row_stride, kBr, min(kBr, p.seqlen_q - i0));
  if (n_tiles > 0) {
    issue_tile<T, kD>(sK(0), k, p.k_row_stride, kBc, min(kBc, p.seqlen_k));
    issue_tile<T, kD>(sV(0), v, p.v_row_stride, kBc, min(kBc, p.seqlen_k));
  }
  cp_async_commit();

  uint32_t qf[kD / 16][4];
  for (int it = 0; it < n_tiles; ++it) {
    const int j0 = it * kBc, st = it % kStages;
    if (it + 1 < n_tiles) {  // prefetch tile it+1 into the other stage (freed by the last barrier)
      const int jn = j0 + kBc, nst = (it + 1) % kStages;
      issue_tile<T, kD>(sK(nst), k + int64_t(jn) * p.k_row_stride, p.k_row_stride, kBc, min(kBc, p.seqlen_k - jn));
      issue_tile<T, kD>(sV(nst), v + int64_t(jn) * p.v_row_stride, p.v_row_stride, kBc, min(kBc, p.seqlen_k - jn));
      cp_async_commit();
      cp_async_wait<1>();  // everything but the prefetch has landed
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // ... for every thread's copies
    if (it == 0) {
#pragma unroll
      for (int ks = 0; ks < kD / 16; ++ks)
        ldmatrix_x4(qf[ks], sQ + swz<kD>(warp * 16 + lane % 16, ks * 16 + (lane / 16) * 8));
    }
    if (j0 + kBc > first_key_masked)
      attend_tile<T, kD, true>(p, qf, sK(st), sV(st), j0, hi, o, m, l);
    else
      attend_tile<T, kD, false>(p, qf, sK(st), sV(st), j0, hi, o, m, l);
    __syncthreads();  // stage st is free for the prefetch of iteration it+1
  }
  cp_async_wait<0>();  // n_tiles == 0: the Q copy is still in flight
  __syncthreads();

  // Epilogue: row sums across the 4 lanes of a row, normalize, stage this warp's 16 rows of O in
  // sQ (swizzled; each warp only touches its own rows), then 16-byte coalesced stores.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  const float inv[2] = {l[0] > 0.0f ? 1.0f / l[0] : 0.0f, l[1] > 0.0f ? 1.0f / l[1] : 0.0f};
#pragma unroll
  for (int n = 0; n < kD / 8; ++n)
#pragma unroll
    for (int r = 0; r < 2; ++r)
      *reinterpret_cast<uint32_t*>(sQ + swz<kD>(warp * 16 + g + 8 * r, 8 * n + 2 * t)) =
          pack2<T>(o[n][2 * r] * inv[r], o[n][2 * r + 1] * inv[r]);
  if (t == 0 && p.lse) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = row0 + 8 * r;
      if (i < p.seqlen_q)
        p.lse[b * p.lse_batch_stride + h * p.lse_head_stride + i] =
            l[r] > 0.0f ? m[r] * p.softmax_scale + logf(l[r]) : -INFINITY;
    }
  }
  __syncwarp();
  constexpr int kChunks = kD / 8;
  T* out = static_cast<T*>(p.out) + b * p.o_batch_stride + h * p.o_head_stride;
#pragma unroll
  for (int idx = lane; idx < 16 * kChunks; idx += 32) {
    const int r = warp * 16 + idx / kChunks, c = (idx % kChunks) * 8;
    if (i0 + r < p.seqlen_q)
      *reinterpret_cast<uint4*>(out + int64_t(i0 + r) * p.o_row_stride + c) =
          *reinterpret_cast<const uint4*>(sQ + swz<kD>(r, c));
  }
}

template <typename T, int kD>
Status launch(const FwdParams& fp) {
  const FwdKernelParams p = make_fwd_kernel_params(fp);
  constexpr int kSmem = (kBr + kStages * 2 * kBc) * kD * sizeof(T);
  auto kernel = fa2_pipelined_kernel<T, kD>;
  LEARN_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const dim3 grid(ceil_div(p.seqlen_q, kBr), p.heads_q, p.batch);
  kernel<<<grid, kThreads, kSmem, static_cast<cudaStream_t>(fp.stream)>>>(p);
  LEARN_LAUNCH_TRY();
  return Status::Ok();
}

}  // namespace

Status forward_v4(const FwdParams& p) {
  return LEARN_DTYPE_SWITCH(p.dtype, T, [&] {
    return LEARN_HDIM_SWITCH(p.head_dim, kD, [&] { return launch<T, kD>(p); });
  });
}

}  // namespace learn
}  // namespace flashlab
