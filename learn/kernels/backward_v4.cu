// learn/kernels/backward_v4.cu — version 4 of the backward pass: pipelined tensor-core kernel.
//
// The math and the fragment flow are v3's (read that file first). What changes:
//
//  1. cp.async double buffering. Q_i, dO_i and their row statistics for the NEXT query block are
//     copied global → shared by cp.async (no registers, no waiting) while the tensor cores work on
//     the current one. One cp.async.wait_group + one barrier at the top of each iteration.
//  2. Swizzled shared memory. A row of a K/Q tile is 128 or 256 bytes, so the 8 rows one ldmatrix
//     phase reads all start in the same bank: an 8-way conflict in v3. Storing 16-byte chunk c of
//     row r at chunk position c ^ (r % 8) spreads those 8 rows over all 32 banks. Every access
//     (cp.async, ldmatrix, the dSᵀ stores) goes through the same swz() function.
//  3. Causal block skipping. Key block j is seen only by query rows i >= j0 − shift, so the loop
//     starts at that query block (about half the work of a causal pass disappears), and only
//     tiles that cross the diagonal evaluate the mask.
//  4. Bigger blocks: 8 warps, 128 key rows. Every Q_i / dO_i tile loaded from L2 now serves twice
//     as many key rows, and the dQ atomics (one per query element per key block) halve. On sm_90
//     they are vector atomics: red.global.add.v2.f32 (atomicAdd on float2), half the operations.
//  5. Deterministic dQ in descending key-block order (see dq_order), which costs little even with
//     causal skipping.
//
// Run: build/learn/attention_backward 4
#include "kernels/backward_mma.cuh"

namespace flashlab {
namespace learn_bwd {
namespace {

// Tile sizes: 8 warps × 16 key rows; query blocks of 64 (the Sᵀ/dPᵀ accumulators are 64 registers
// per thread, next to 128 for dK/dV at head_dim 128: 64 is as large as fits without spilling).
constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kBlockN = 16 * kWarps;  // key rows per thread block
constexpr int kBlockM = 64;           // query rows per iteration
constexpr int kStages = 2;            // query-side buffers: one computed on, one in flight

// Element offset of (row, col) in a swizzled tile whose rows hold ROW_ELEMS 16-bit elements
// (ROW_ELEMS / 8 >= 8 chunks of 16 bytes, so the XOR stays inside the row).
template <int ROW_ELEMS>
__device__ __forceinline__ int swz(int row, int col) {
  static_assert(ROW_ELEMS % 64 == 0, "swizzle needs rows of at least 8 chunks of 16 bytes");
  return row * ROW_ELEMS + ((((col >> 3) ^ row) & 7) | ((col >> 3) & ~7)) * 8 + (col & 7);
}

template <typename T, int HD>
struct SmemV4 {
  T k[kBlockN * HD];                 // swz<HD>
  T v[kBlockN * HD];                 // swz<HD>
  T q[kStages][kBlockM * HD];        // swz<HD>
  T dout[kStages][kBlockM * HD];     // swz<HD>
  T dst[kBlockN * kBlockM];          // dSᵀ [key row][query col], swz<kBlockM>
  float lse2[kStages][kBlockM];
  float d[kStages][kBlockM];
};

// cp.async rows [row0, row0 + ROWS) of one head into a swizzled [ROWS][HD] tile. Rows past the end
// are zero-filled by the copy itself (src-size 0).
template <typename T, int HD, int ROWS>
__device__ void load_tile_async(T* dst, const void* base, const Strides& st, int b, int row0, int h, int rows) {
  constexpr int kChunks = HD / 8;
  const T* src = static_cast<const T*>(base);
  for (int c = threadIdx.x; c < ROWS * kChunks; c += kThreads) {
    const int r = c / kChunks, col = (c % kChunks) * 8;
    const bool in = row0 + r < rows;
    const T* from = in ? src + elem_index(st, b, row0 + r, h) + col : src;
    mma::cp_async_16(dst + swz<HD>(r, col), from, in);
  }
}

template <typename T, int HD>
__device__ void load_query_block(SmemV4<T, HD>& sm, int stage, const BwdArgs& a, int b, int h, int i0) {
  load_tile_async<T, HD, kBlockM>(sm.q[stage], a.q, a.q_st, b, i0, h, a.seqlen_q);
  load_tile_async<T, HD, kBlockM>(sm.dout[stage], a.dout, a.do_st, b, i0, h, a.seqlen_q);
  // lse2 and D rows are padded to a multiple of 128 in the workspace: whole 16-byte chunks.
  constexpr int kStatChunks = kBlockM / 4;
  if (threadIdx.x < 2 * kStatChunks) {
    const int c = threadIdx.x % kStatChunks;
    const float* src = (threadIdx.x < kStatChunks ? a.lse2 : a.dvec) + row_stat_index(a, b, h, i0) + 4 * c;
    float* dst = (threadIdx.x < kStatChunks ? sm.lse2[stage] : sm.d[stage]) + 4 * c;
    mma::cp_async_16(dst, src, true);
  }
}

// dQ accumulation: two adjacent columns at once (one vector atomic on sm_90).
__device__ __forceinline__ void add_pair(float* p, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(p), make_float2(x, y));
#else
  atomicAdd(p, x);
  atomicAdd(p + 1, y);
#endif
}

template <typename T, int HD>
__global__ void __launch_bounds__(kThreads, 1) bwd_v4_kernel(BwdArgs a) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<SmemV4<T, HD>*>(smem_raw);
  // Key block. Atomic dQ: heaviest first (causal: block 0 sees every query block). Deterministic
  // dQ: last key block first, because the order of the dQ additions goes from the last contributor
  // down (see dq_order below) and a block may only wait for blocks that were dispatched before it.
  const int n = a.dq_turn ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int hk = blockIdx.y, b = blockIdx.z;
  const int j0 = n * kBlockN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int q_blocks = (a.seqlen_q + kBlockM - 1) / kBlockM;
  // Causal skipping: the first query row that sees key j0 is j0 − shift.
  const int m_begin = a.causal ? max(0, j0 - a.shift) / kBlockM : 0;
  const int per_head = q_blocks - m_begin;  // > 0: the last query row sees every key
  const int iters = per_head * a.group;     // (GQA head, query block) pairs, flattened so the
                                            // prefetch runs across head boundaries too

  load_tile_async<T, HD, kBlockN>(sm.k, a.k, a.k_st, b, j0, hk, a.seqlen_k);
  load_tile_async<T, HD, kBlockN>(sm.v, a.v, a.v_st, b, j0, hk, a.seqlen_k);
  load_query_block(sm, 0, a, b, hk * a.group, m_begin * kBlockM);
  mma::cp_async_commit();

  float dk[HD / 8][4] = {}, dv[HD / 8][4] = {};

  for (int it = 0; it < iters; ++it) {
    const int stage = it % kStages;
    const int h = hk * a.group + it / per_head;
    const int m = m_begin + it % per_head;
    const int i0 = m * kBlockM;
    mma::cp_async_wait<0>();  // this iteration's tiles have landed (this thread's copies) ...
    __syncthreads();          // ... and everyone's; the previous iteration is done with the others
    if (it + 1 < iters) {     // prefetch the next query block into the other stage
      const int h1 = hk * a.group + (it + 1) / per_head, m1 = m_begin + (it + 1) % per_head;
      load_query_block(sm, (it + 1) % kStages, a, b, h1, m1 * kBlockM);
    }
    mma::cp_async_commit();
    const T* q = sm.q[stage];
    const T* dout = sm.dout[stage];

    // ---- Sᵀ = K_w·Q_iᵀ, dPᵀ = V_w·dO_iᵀ (as v3, through the swizzle)
    float s[kBlockM / 8][4] = {}, dp[kBlockM / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      uint32_t ak[4], av[4];
      const int ar = warp * 16 + (lane & 15), ac = kk * 16 + (lane >> 4) * 8;
      mma::ldmatrix_x4(ak, sm.k + swz<HD>(ar, ac));
      mma::ldmatrix_x4(av, sm.v + swz<HD>(ar, ac));
#pragma unroll
      for (int np = 0; np < kBlockM / 16; ++np) {
        const int row = np * 16 + (lane & 7) + (lane >> 4) * 8, col = kk * 16 + ((lane >> 3) & 1) * 8;
        uint32_t bq[4], bo[4];
        mma::ldmatrix_x4(bq, q + swz<HD>(row, col));
        mma::ldmatrix_x4(bo, dout + swz<HD>(row, col));
        mma::mma_16816<T>(s[2 * np], ak, bq[0], bq[1]);
        mma::mma_16816<T>(s[2 * np + 1], ak, bq[2], bq[3]);
        mma::mma_16816<T>(dp[2 * np], av, bo[0], bo[1]);
        mma::mma_16816<T>(dp[2 * np + 1], av, bo[2], bo[3]);
      }
    }

    // ---- Pᵀ, dSᵀ; the mask only where this tile crosses the diagonal
    const bool diagonal = a.causal && j0 + kBlockN - 1 > i0 + a.shift;
    const float* lse2 = sm.lse2[stage];
    const float* dd = sm.d[stage];
#pragma unroll
    for (int nt = 0; nt < kBlockM / 8; ++nt) {
      const int il = nt * 8 + 2 * t;
      const float2 l2 = *reinterpret_cast<const float2*>(lse2 + il);
      const float2 d2 = *reinterpret_cast<const float2*>(dd + il);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int jl = warp * 16 + g + 8 * (e / 2);
        float p = exp2f(s[nt][e] * a.scale_log2 - (e % 2 ? l2.y : l2.x));
        if (diagonal && j0 + jl > i0 + il + (e % 2) + a.shift) p = 0.0f;
        s[nt][e] = p;
        dp[nt][e] = p * (dp[nt][e] - (e % 2 ? d2.y : d2.x));
      }
    }

    // ---- dV_w += Pᵀ·dO_i, dK_w += dSᵀ·Q_i
#pragma unroll
    for (int kk = 0; kk < kBlockM / 16; ++kk) {
      uint32_t ap[4], ads[4];
      mma::acc_to_a<T>(ap, s[2 * kk], s[2 * kk + 1]);
      mma::acc_to_a<T>(ads, dp[2 * kk], dp[2 * kk + 1]);
#pragma unroll
      for (int dn = 0; dn < HD / 16; ++dn) {
        const int row = kk * 16 + (lane & 15), col = dn * 16 + (lane >> 4) * 8;
        uint32_t bo[4], bq[4];
        mma::ldmatrix_x4_trans(bo, dout + swz<HD>(row, col));
        mma::ldmatrix_x4_trans(bq, q + swz<HD>(row, col));
        mma::mma_16816<T>(dv[2 * dn], ap, bo[0], bo[1]);
        mma::mma_16816<T>(dv[2 * dn + 1], ap, bo[2], bo[3]);
        mma::mma_16816<T>(dk[2 * dn], ads, bq[0], bq[1]);
        mma::mma_16816<T>(dk[2 * dn + 1], ads, bq[2], bq[3]);
      }
    }

    // ---- dSᵀ to shared memory
#pragma unroll
    for (int nt = 0; nt < kBlockM / 8; ++nt) {
      const int jl = warp * 16 + g, il = nt * 8 + 2 * t;
      *reinterpret_cast<uint32_t*>(sm.dst + swz<kBlockM>(jl, il)) = mma::pack2<T>(dp[nt][0], dp[nt][1]);
      *reinterpret_cast<uint32_t*>(sm.dst + swz<kBlockM>(jl + 8, il)) = mma::pack2<T>(dp[nt][2], dp[nt][3]);
    }
    __syncthreads();

    // ---- dQ_i += dS·K_j: warp (wm, wn) computes query rows [16wm, +16) × columns [wn·HD/2, +HD/2)
    constexpr int kDqCols = HD / (kWarps / 4);
    const int wm = warp % 4, wn = warp / 4;
    float dq[kDqCols / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      uint32_t ads[4];
      mma::ldmatrix_x4_trans(ads, sm.dst + swz<kBlockM>(kk * 16 + (lane & 7) + (lane >> 4) * 8,
                                                        wm * 16 + ((lane >> 3) & 1) * 8));
#pragma unroll
      for (int dn = 0; dn < kDqCols / 16; ++dn) {
        uint32_t bk[4];
        mma::ldmatrix_x4_trans(bk, sm.k + swz<HD>(kk * 16 + (lane & 15),
                                                  wn * kDqCols + dn * 16 + (lane >> 4) * 8));
        mma::mma_16816<T>(dq[2 * dn], ads, bk[0], bk[1]);
        mma::mma_16816<T>(dq[2 * dn + 1], ads, bk[2], bk[3]);
      }
    }
    // Deterministic order of the dQ_i additions: key blocks N(m), N(m)−1, ..., 0, where N(m) is the
    // last key block that sees query block m. With causal skipping, block n+1 reaches query block
    // m two iterations before block n does, so in this order nobody waits in the steady state
    // (ascending order would throttle every block to the pace of block 0: measured 2x slower).
    int* turn = dq_turn_slot(a, b, h, q_blocks, m);
    const int last = a.causal ? min(static_cast<int>(gridDim.x) - 1, ((m + 1) * kBlockM - 1 + a.shift) / kBlockN)
                              : static_cast<int>(gridDim.x) - 1;
    const int dq_order = last - n;  // how many key blocks add into dQ_i before this one
    dq_turn_wait(turn, dq_order);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = i0 + wm * 16 + g + 8 * half;
      if (i < a.seqlen_q) {
        float* acc = a.dq_acc + dq_acc_index(a, b, h, i) + wn * kDqCols + 2 * t;
#pragma unroll
        for (int nt = 0; nt < kDqCols / 8; ++nt) add_pair(acc + nt * 8, dq[nt][2 * half], dq[nt][2 * half + 1]);
      }
    }
    dq_turn_pass(turn, dq_order);
  }
  mma::cp_async_wait<0>();  // nothing may be in flight when the block exits

  // ---- epilogue: dK = c·dK, dV (as v3)
  mma::store_dkdv<T, HD>(a, b, hk, j0 + warp * 16, g, t, dk, dv);
}

template <typename T, int HD>
Status launch(const BwdArgs& a, cudaStream_t stream) {
  const dim3 grid((a.seqlen_k + kBlockN - 1) / kBlockN, a.heads_kv, a.batch);
  return learn::launch_with_smem(bwd_v4_kernel<T, HD>, grid, kThreads, sizeof(SmemV4<T, HD>), stream, a);
}

}  // namespace

// As v3 around the kernel (backward_common.cuh).
Status backward_v4(const BwdParams& p) {
  const int turn_block_m = p.deterministic ? kBlockM : 0;
  return run_with_workspace(p, turn_block_m, Prologue::kPreprocess, [](const BwdArgs& a, cudaStream_t s) {
    return LEARN_DTYPE_SWITCH(a.dtype, T, [&] {
      return LEARN_HDIM_SWITCH(a.head_dim, kHeadDim, [&] { return launch<T, kHeadDim>(a, s); });
    });
  });
}

}  // namespace learn_bwd
}  // namespace flashlab
