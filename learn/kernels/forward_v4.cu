// learn/kernels/forward_v4.cu — v4: pipelined tensor-core FlashAttention-2.
//
// Changes over v3 (same mma.sync / ldmatrix arithmetic and register-resident P):
//   1. cp.async pipeline: K/V tile j+1 is copied global -> shared by the SM's async-copy path (no
//      registers, no stall) while the warps compute on tile j. v3 waited for every load.
//   2. XOR swizzle: the 16-byte chunk c of shared row r is stored at chunk c ^ (r % 8). The 8 row
//      addresses of every ldmatrix then fall into 8 different bank groups: no bank conflicts
//      (v3's dense rows made every ldmatrix an 8-way conflict).
//   3. Causal block skipping: a Q tile stops at the last K tile that holds a visible key, and only
//      tiles that cross the diagonal (or the end of the sequence) pay for the mask; the others take
//      a mask-free instantiation of the same code. Causal tiles are issued longest first.
//   4. 32 query rows per warp (two m16 tiles): every K/V fragment read from shared memory feeds two
//      MMAs, halving shared-memory traffic per FLOP against v3's 16 rows per warp.
//   5. The O rescale is skipped when no row of the warp found a new max (a warp vote): after the
//      first few tiles that is almost every tile, and the multiplies sit between the two products.
//   6. 128-bit global accesses: loads are 16-byte cp.async; O is staged through shared memory (in
//      the swizzled layout) so that it is written with 16-byte coalesced stores.
//   7. The softmax scale is folded into the exponent: exp2(s·c − m·c) is one FFMA + one MUFU.EX2.
#include <cmath>
#include <type_traits>

#include "kernels/common.cuh"
#include "kernels/forward.h"
#include "kernels/mma.cuh"

namespace flashlab {
namespace learn {

namespace {

// Tile configuration. The numbers behind each choice are in docs/learn/04-pipelined.md (H100,
// bf16, d 128, measured one configuration at a time).
//   kM      m16 row tiles per warp. 2 (32 rows per warp): each K/V fragment feeds two MMAs. Q is
//           re-read from shared memory per k-step (holding 32 rows of Q would cost 64 registers);
//           with kM = 1 it stays in registers as in v3.
//   kWarps  warps per block; kBr = 16 * kM * kWarps query rows per block.
//   kBc     keys per tile: S is kM * kBc / 2 fp32 registers per thread.
//   kStages K/V tiles in flight. 3 lets a block drop the end-of-iteration barrier (the stage a
//           prefetch overwrites was last read two iterations ago).
template <int kD, int kM_, int kWarps_, int kBc_, int kStages_>
struct Config {
  static constexpr int kM = kM_, kWarps = kWarps_, kBc = kBc_, kStages = kStages_;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kBr = 16 * kM * kWarps;
  static constexpr int kSmem = (kBr + kStages * 2 * kBc) * kD * 2;  // bytes (16-bit elements)
  // Blocks per SM the registers allow (65536 per SM, <= 255 per thread): 2 when 4 warps.
  static constexpr int kMinBlocks = kWarps <= 4 ? 2 : 1;
  static_assert(kD == 64 || kD == 128, "the learning kernels instantiate head_dim 64 and 128");
  static_assert(kM == 1 || kM == 2, "32 rows per warp is the register limit (O alone is kM * kD / 2 registers)");
  static_assert(kBc % 16 == 0, "P·V consumes keys in k-steps of 16");
  static_assert(kStages == 2 || kStages == 3, "the barrier logic covers 2 or 3 stages");
  static_assert(kSmem <= 227 * 1024, "more shared memory than an H100 block can have");
};

// The one place tile sizes are chosen.
//   full attention: 8 warps x 32 rows = 256 rows per block, 3 stages (160 KiB of shared memory at
//     d = 128, one block per SM): each K/V tile serves 256 rows, one barrier per tile.
//     Measured 305 / 327 TFLOP/s at seqlen 2k / 16k vs 292 / 310 for the causal choice below.
//   causal: 4 warps x 32 rows = 128 rows, 2 stages, two blocks per SM: smaller blocks waste less
//     work on the diagonal and balance the triangle better (244 vs 235 TFLOP/s at 2k).
template <int kD, bool kCausal>
using TileConfig = std::conditional_t<kCausal, Config<kD, 2, 4, 64, 2>, Config<kD, 2, 8, 64, 3>>;

// Element offset of (row r, column c) in a swizzled tile with kD columns (kD/8 chunks of 16 B).
template <int kD>
__device__ __forceinline__ int swz(int r, int c) {
  return r * kD + ((((c >> 3) ^ (r & 7))) << 3) + (c & 7);
}

// Issues cp.async copies of `rows` rows of a (rows × kD) tile into swizzled shared memory. Rows at
// or past `valid` are zero-filled (src-size 0) from a safe address.
template <typename T, int kD, int kThreads>
__device__ __forceinline__ void issue_tile(T* dst, const T* src, int64_t stride, int rows, int valid) {
  constexpr int kChunks = kD / 8;
  for (int idx = threadIdx.x; idx < rows * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = (idx % kChunks) * 8;
    const bool ok = r < valid;
    cp_async_16(dst + swz<kD>(r, c), ok ? src + r * stride + c : src, ok);
  }
}

// Per-thread state of the online softmax for its 2*kM rows (rows g and g+8 of each m-tile).
template <int kD, int kM>
struct RowState {
  float o[kM][kD / 8][4];  // O accumulators (16 rows × kD per m-tile)
  float m[kM][2];          // running max of the raw scores
  float l[kM][2];          // running sum of exp (this lane's columns only)
  int row0;                // query row of (m-tile 0, g); m-tile mi, half r is row0 + 16 mi + 8 r
};

// One K/V tile: S = Q·Kᵀ, mask (only when kMask), online softmax, O += P·V.
template <typename T, int kD, class C, bool kMask>
__device__ __forceinline__ void attend_tile(const FwdKernelParams& p, const uint32_t (&qf)[kD / 16][4],
                                            const T* sQw, const T* sK, const T* sV, int j0,
                                            RowState<kD, C::kM>& st) {
  constexpr int kM = C::kM, kBc = C::kBc;
  const int lane = threadIdx.x % 32, t = lane % 4;
  float s[kM][kBc / 8][4];
#pragma unroll
  for (int mi = 0; mi < kM; ++mi)
#pragma unroll
    for (int n = 0; n < kBc / 8; ++n) s[mi][n][0] = s[mi][n][1] = s[mi][n][2] = s[mi][n][3] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < kD / 16; ++ks) {
    uint32_t qa[kM][4];
#pragma unroll
    for (int mi = 0; mi < kM; ++mi) {
      if constexpr (kM == 1) {
#pragma unroll
        for (int e = 0; e < 4; ++e) qa[mi][e] = qf[ks][e];
      } else {
        ldmatrix_x4(qa[mi], sQw + swz<kD>(mi * 16 + lane % 16, ks * 16 + (lane / 16) * 8));
      }
    }
#pragma unroll
    for (int np = 0; np < kBc / 16; ++np) {
      uint32_t kf[4];
      ldmatrix_x4(kf, sK + swz<kD>(np * 16 + lane % 8 + (lane / 16) * 8, ks * 16 + ((lane / 8) % 2) * 8));
#pragma unroll
      for (int mi = 0; mi < kM; ++mi) {
        mma_16816<T>(s[mi][2 * np], qa[mi], kf[0], kf[1]);
        mma_16816<T>(s[mi][2 * np + 1], qa[mi], kf[2], kf[3]);
      }
    }
  }

#pragma unroll
  for (int mi = 0; mi < kM; ++mi) {
    // Row max of the raw scores (scale > 0, so max commutes with scaling).
    float m_tile[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kBc / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        // (last_visible_key is recomputed here rather than kept: registers are the scarce resource)
        if (kMask && j0 + 8 * n + 2 * t + (e % 2) > last_visible_key(p, st.row0 + 16 * mi + 8 * (e / 2)))
          s[mi][n][e] = -INFINITY;
        m_tile[e / 2] = fmaxf(m_tile[e / 2], s[mi][n][e]);
      }
    float neg_m_scaled[2], alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      m_tile[r] = fmaxf(m_tile[r], __shfl_xor_sync(0xffffffffu, m_tile[r], 1));
      m_tile[r] = fmaxf(m_tile[r], __shfl_xor_sync(0xffffffffu, m_tile[r], 2));
      const float m_new = fmaxf(st.m[mi][r], m_tile[r]);
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // nothing visible yet: P = 0, no NaN
      alpha[r] = fast_exp2((st.m[mi][r] - m_use) * p.scale_log2);
      st.m[mi][r] = m_new;
      st.l[mi][r] *= alpha[r];
      neg_m_scaled[r] = -m_use * p.scale_log2;
    }
    // Rescale O only when some row of the warp got a new max (late tiles rarely do).
    if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
      for (int n = 0; n < kD / 8; ++n) {
        st.o[mi][n][0] *= alpha[0];
        st.o[mi][n][1] *= alpha[0];
        st.o[mi][n][2] *= alpha[1];
        st.o[mi][n][3] *= alpha[1];
      }
    }
#pragma unroll
    for (int n = 0; n < kBc / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[mi][n][e] = fast_exp2(fmaf(s[mi][n][e], p.scale_log2, neg_m_scaled[e / 2]));
        st.l[mi][e / 2] += s[mi][n][e];
      }
  }

#pragma unroll
  for (int kk = 0; kk < kBc / 16; ++kk) {
    uint32_t pa[kM][4];
#pragma unroll
    for (int mi = 0; mi < kM; ++mi) {
      pa[mi][0] = pack2<T>(s[mi][2 * kk][0], s[mi][2 * kk][1]);
      pa[mi][1] = pack2<T>(s[mi][2 * kk][2], s[mi][2 * kk][3]);
      pa[mi][2] = pack2<T>(s[mi][2 * kk + 1][0], s[mi][2 * kk + 1][1]);
      pa[mi][3] = pack2<T>(s[mi][2 * kk + 1][2], s[mi][2 * kk + 1][3]);
    }
#pragma unroll
    for (int dp = 0; dp < kD / 16; ++dp) {
      uint32_t vf[4];
      ldmatrix_x4_trans(vf, sV + swz<kD>(kk * 16 + lane % 8 + ((lane / 8) % 2) * 8, dp * 16 + (lane / 16) * 8));
#pragma unroll
      for (int mi = 0; mi < kM; ++mi) {
        mma_16816<T>(st.o[mi][2 * dp], pa[mi], vf[0], vf[1]);
        mma_16816<T>(st.o[mi][2 * dp + 1], pa[mi], vf[2], vf[3]);
      }
    }
  }
}

template <typename T, int kD, class C>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks) fa2_pipelined_kernel(FwdKernelParams p) {
  constexpr int kM = C::kM, kBr = C::kBr, kBc = C::kBc, kThreads = C::kThreads;
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
  T* sQw = sQ + warp * 16 * kM * kD;  // this warp's rows (swizzle is per row: r & 7 unchanged)

  const T* q = static_cast<const T*>(p.q) + b * p.q_batch_stride + int64_t(i0) * p.q_row_stride + h * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + b * p.k_batch_stride + hk * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + b * p.v_batch_stride + hk * p.v_head_stride;

  // Which K tiles this Q tile needs: all, or (causal) up to the one holding the last row's last key.
  const int last_key = p.causal ? min(p.seqlen_k - 1, i0 + kBr - 1 + p.causal_shift) : p.seqlen_k - 1;
  const int n_tiles = last_key < 0 ? 0 : last_key / kBc + 1;
  // Tiles from here on may hold a masked key for some row: past the first row's diagonal or past seqlen_k.
  const int first_key_masked = p.causal ? min(i0 + p.causal_shift + 1, p.seqlen_k) : p.seqlen_k;

  RowState<kD, kM> st;
  st.row0 = i0 + warp * 16 * kM + g;
#pragma unroll
  for (int mi = 0; mi < kM; ++mi) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      st.m[mi][r] = -INFINITY;
      st.l[mi][r] = 0.0f;
    }
#pragma unroll
    for (int n = 0; n < kD / 8; ++n) st.o[mi][n][0] = st.o[mi][n][1] = st.o[mi][n][2] = st.o[mi][n][3] = 0.0f;
  }

  // Prologue: Q and the first K/V tile in one cp.async group.
  issue_tile<T, kD, kThreads>(sQ, q, p.q_row_stride, kBr, min(kBr, p.seqlen_q - i0));
  if (n_tiles > 0) {
    issue_tile<T, kD, kThreads>(sK(0), k, p.k_row_stride, kBc, min(kBc, p.seqlen_k));
    issue_tile<T, kD, kThreads>(sV(0), v, p.v_row_stride, kBc, min(kBc, p.seqlen_k));
  }
  cp_async_commit();

  uint32_t qf[kD / 16][4];  // Q fragments, kept in registers when kM == 1
  for (int it = 0; it < n_tiles; ++it) {
    const int j0 = it * kBc, stage = it % C::kStages;
    if (it + 1 < n_tiles) {  // prefetch tile it+1 into the other stage (freed by the last barrier)
      const int jn = j0 + kBc, nst = (it + 1) % C::kStages;
      issue_tile<T, kD, kThreads>(sK(nst), k + int64_t(jn) * p.k_row_stride, p.k_row_stride, kBc,
                                  min(kBc, p.seqlen_k - jn));
      issue_tile<T, kD, kThreads>(sV(nst), v + int64_t(jn) * p.v_row_stride, p.v_row_stride, kBc,
                                  min(kBc, p.seqlen_k - jn));
      cp_async_commit();
      cp_async_wait<1>();  // everything but the prefetch has landed
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // ... for every thread's copies
    if constexpr (kM == 1) {
      if (it == 0) {
#pragma unroll
        for (int ks = 0; ks < kD / 16; ++ks) ldmatrix_x4(qf[ks], sQw + swz<kD>(lane % 16, ks * 16 + (lane / 16) * 8));
      }
    }
    if (j0 + kBc > first_key_masked)
      attend_tile<T, kD, C, true>(p, qf, sQw, sK(stage), sV(stage), j0, st);
    else
      attend_tile<T, kD, C, false>(p, qf, sQw, sK(stage), sV(stage), j0, st);
    // Stage `stage` is rewritten by the prefetch of iteration it + kStages - 1. With 2 stages that
    // is the next iteration: wait for every warp here. With 3, the barrier at the top of the next
    // iteration already orders it.
    if constexpr (C::kStages == 2) __syncthreads();
  }
  cp_async_wait<0>();  // n_tiles == 0: the Q copy is still in flight
  __syncthreads();

  // Epilogue: row sums across the 4 lanes of a row, normalize, stage this warp's rows of O in
  // sQ (swizzled; each warp only touches its own rows), then 16-byte coalesced stores.
#pragma unroll
  for (int mi = 0; mi < kM; ++mi)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float& l = st.l[mi][r];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;  // no visible key: O = 0
      const int rl = mi * 16 + g + 8 * r;            // row within the warp's rows
#pragma unroll
      for (int n = 0; n < kD / 8; ++n)
        *reinterpret_cast<uint32_t*>(sQw + swz<kD>(rl, 8 * n + 2 * t)) =
            pack2<T>(st.o[mi][n][2 * r] * inv, st.o[mi][n][2 * r + 1] * inv);
      const int i = i0 + warp * 16 * kM + rl;
      if (t == 0 && p.lse && i < p.seqlen_q)
        p.lse[lse_index(p, b, h, i)] = l > 0.0f ? st.m[mi][r] * p.softmax_scale + logf(l) : -INFINITY;
    }
  __syncwarp();
  constexpr int kChunks = kD / 8;
  T* out = static_cast<T*>(p.out) + b * p.o_batch_stride + h * p.o_head_stride;
  for (int idx = lane; idx < 16 * kM * kChunks; idx += 32) {
    const int rl = idx / kChunks, c = (idx % kChunks) * 8;
    const int i = i0 + warp * 16 * kM + rl;
    if (i < p.seqlen_q)
      *reinterpret_cast<uint4*>(out + int64_t(i) * p.o_row_stride + c) =
          *reinterpret_cast<const uint4*>(sQw + swz<kD>(rl, c));
  }
}

template <typename T, int kD, class C>
Status launch(const FwdParams& fp) {
  const FwdKernelParams p = make_fwd_kernel_params(fp);
  const dim3 grid(ceil_div(p.seqlen_q, C::kBr), p.heads_q, p.batch);
  return launch_with_smem(fa2_pipelined_kernel<T, kD, C>, grid, C::kThreads, C::kSmem,
                          static_cast<cudaStream_t>(fp.stream), p);
}

}  // namespace

Status forward_v4(const FwdParams& p) {
  return LEARN_DTYPE_SWITCH(p.dtype, T, [&] {
    return LEARN_HDIM_SWITCH(p.head_dim, kD, [&] {
      return LEARN_BOOL_SWITCH(p.causal, kCausal, [&] { return launch<T, kD, TileConfig<kD, kCausal>>(p); });
    });
  });
}

}  // namespace learn
}  // namespace flashlab
