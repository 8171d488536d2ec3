// learn/kernels/backward_v3.cu — version 3 of the backward pass: tensor cores.
//
// Same partition as v2 (one thread block per key block, dQ through an fp32 accumulator), but the
// five products run on the tensor cores with mma.sync.m16n8k16 (16-bit inputs, fp32 accumulate),
// operands loaded from shared memory with ldmatrix (backward_mma.cuh has the fragment layouts).
//
// Block: 4 warps, 64 key rows (16 per warp), query blocks of 64 rows. Warp w owns key rows
// [16w, 16w+16) of dK and dV for the whole loop. The trick that keeps P out of shared memory is to
// compute the TRANSPOSED scores:
//
//   Sᵀ  = K_w·Q_iᵀ      (16 × 64)  A = K rows (ldmatrix),        B = Q rows (ldmatrix)
//   dPᵀ = V_w·dO_iᵀ     (16 × 64)  A = V rows,                   B = dO rows
//   Pᵀ  = exp2(Sᵀ·c·log2e − lse2),  dSᵀ = Pᵀ∘(dPᵀ − D)          (registers, elementwise)
//   dV_w += Pᵀ·dO_i     (16 × d)   A = Pᵀ from the accumulators, B = dO (ldmatrix.trans)
//   dK_w += dSᵀ·Q_i     (16 × d)   A = dSᵀ from the accumulators, B = Q (ldmatrix.trans)
//   dQ_i += dS·K_j      (64 × d)   A = dS: dSᵀ goes through shared memory (every warp needs all 64
//                                  key rows) and comes back transposed by ldmatrix.trans; B = K (.trans)
//
// Because Sᵀ's accumulator rows are key rows, the accumulator of Pᵀ is already laid out as the A
// operand of Pᵀ·dO: no shuffle, no shared-memory round trip. Only dS needs one (for dQ).
// What v3 does NOT do yet (v4 does): the loads are synchronous (the tensor cores wait for every
// tile), shared memory rows are unpadded (ldmatrix of 8 rows of 128 or 256 bytes hits the same
// banks: 8-way conflicts), and causal tiles above the diagonal are computed and then masked.
//
// Run: build/learn/attention_backward 3
#include "kernels/backward_mma.cuh"

namespace flashlab {
namespace learn_bwd {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kBlockN = 16 * kWarps;  // key rows per thread block
constexpr int kBlockM = 64;           // query rows per iteration

template <typename T, int HD>
struct SmemV3 {
  T k[kBlockN][HD];
  T v[kBlockN][HD];
  T q[kBlockM][HD];
  T dout[kBlockM][HD];
  T dst[kBlockN][kBlockM];  // dSᵀ: key rows × query columns, as the accumulators hold it
  float lse2[kBlockM];
  float d[kBlockM];
};

// Rows [row0, row0 + ROWS) of one head into a dense [ROWS][HD] tile, 16 bytes per thread and step.
template <typename T, int HD, int ROWS>
__device__ void load_tile(T (*dst)[HD], const void* base, const Strides& st, int b, int row0, int h, int rows) {
  constexpr int kChunks = HD / 8;  // 16-byte chunks per row
  const T* src = static_cast<const T*>(base);
  for (int c = threadIdx.x; c < ROWS * kChunks; c += kThreads) {
    const int r = c / kChunks, col = (c % kChunks) * 8;
    uint4 val = make_uint4(0, 0, 0, 0);  // rows past the end: zeros (garbage could be NaN)
    if (row0 + r < rows) val = *reinterpret_cast<const uint4*>(src + elem_index(st, b, row0 + r, h) + col);
    *reinterpret_cast<uint4*>(&dst[r][col]) = val;
  }
}

template <typename T, int HD>
__global__ void __launch_bounds__(kThreads) bwd_v3_kernel(BwdArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& sm = *reinterpret_cast<SmemV3<T, HD>*>(smem_raw);
  const int n = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int j0 = n * kBlockN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;  // fragment coordinates (backward_mma.cuh)
  const int q_blocks = (a.seqlen_q + kBlockM - 1) / kBlockM;

  load_tile<T, HD, kBlockN>(sm.k, a.k, a.k_st, b, j0, hk, a.seqlen_k);
  load_tile<T, HD, kBlockN>(sm.v, a.v, a.v_st, b, j0, hk, a.seqlen_k);

  float dk[HD / 8][4] = {}, dv[HD / 8][4] = {};  // this warp's 16 key rows × HD, in C fragments

  for (int hg = 0; hg < a.group; ++hg) {
    const int h = hk * a.group + hg;
    for (int m = 0; m < q_blocks; ++m) {
      const int i0 = m * kBlockM;
      __syncthreads();  // the previous iteration no longer reads q, dout, dst
      load_tile<T, HD, kBlockM>(sm.q, a.q, a.q_st, b, i0, h, a.seqlen_q);
      load_tile<T, HD, kBlockM>(sm.dout, a.dout, a.do_st, b, i0, h, a.seqlen_q);
      load_row_stats<kBlockM>(sm.lse2, sm.d, a, b, h, i0);
      __syncthreads();

      // ---- Sᵀ = K_w·Q_iᵀ and dPᵀ = V_w·dO_iᵀ: (16 key rows) × (64 query columns), k = HD
      float s[kBlockM / 8][4] = {}, dp[kBlockM / 8][4] = {};
#pragma unroll
      for (int kk = 0; kk < HD / 16; ++kk) {
        uint32_t ak[4], av[4];
        mma::ldmatrix_x4(ak, &sm.k[warp * 16 + (lane & 15)][kk * 16 + (lane >> 4) * 8]);
        mma::ldmatrix_x4(av, &sm.v[warp * 16 + (lane & 15)][kk * 16 + (lane >> 4) * 8]);
#pragma unroll
        for (int np = 0; np < kBlockM / 16; ++np) {  // two 8-column tiles per ldmatrix.x4
          const int row = np * 16 + (lane & 7) + (lane >> 4) * 8, col = kk * 16 + ((lane >> 3) & 1) * 8;
          uint32_t bq[4], bo[4];
          mma::ldmatrix_x4(bq, &sm.q[row][col]);
          mma::ldmatrix_x4(bo, &sm.dout[row][col]);
          mma::mma_16816<T>(s[2 * np], ak, bq[0], bq[1]);
          mma::mma_16816<T>(s[2 * np + 1], ak, bq[2], bq[3]);
          mma::mma_16816<T>(dp[2 * np], av, bo[0], bo[1]);
          mma::mma_16816<T>(dp[2 * np + 1], av, bo[2], bo[3]);
        }
      }

      // ---- Pᵀ and dSᵀ in place (s ← Pᵀ, dp ← dSᵀ). Element e of tile nt sits at
      //      key row 16w + g + 8(e/2), query column 8nt + 2t + e%2.
#pragma unroll
      for (int nt = 0; nt < kBlockM / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int jl = warp * 16 + g + 8 * (e / 2), il = nt * 8 + 2 * t + (e % 2);
          float p = exp2f(s[nt][e] * a.scale_log2 - sm.lse2[il]);
          if (!visible(a, i0 + il, j0 + jl)) p = 0.0f;  // v3 masks every tile (no skipping yet)
          s[nt][e] = p;
          dp[nt][e] = p * (dp[nt][e] - sm.d[il]);
        }
      }

      // ---- dV_w += Pᵀ·dO_i and dK_w += dSᵀ·Q_i: A from registers, B by ldmatrix.trans, k = 64
#pragma unroll
      for (int kk = 0; kk < kBlockM / 16; ++kk) {
        uint32_t ap[4], ads[4];
        mma::acc_to_a<T>(ap, s[2 * kk], s[2 * kk + 1]);
        mma::acc_to_a<T>(ads, dp[2 * kk], dp[2 * kk + 1]);
#pragma unroll
        for (int dn = 0; dn < HD / 16; ++dn) {
          const int row = kk * 16 + (lane & 15), col = dn * 16 + (lane >> 4) * 8;
          uint32_t bo[4], bq[4];
          mma::ldmatrix_x4_trans(bo, &sm.dout[row][col]);
          mma::ldmatrix_x4_trans(bq, &sm.q[row][col]);
          mma::mma_16816<T>(dv[2 * dn], ap, bo[0], bo[1]);
          mma::mma_16816<T>(dv[2 * dn + 1], ap, bo[2], bo[3]);
          mma::mma_16816<T>(dk[2 * dn], ads, bq[0], bq[1]);
          mma::mma_16816<T>(dk[2 * dn + 1], ads, bq[2], bq[3]);
        }
      }

      // ---- dSᵀ to shared memory (16-bit), as the accumulators hold it: [key row][query col]
#pragma unroll
      for (int nt = 0; nt < kBlockM / 8; ++nt) {
        const int jl = warp * 16 + g, il = nt * 8 + 2 * t;
        *reinterpret_cast<uint32_t*>(&sm.dst[jl][il]) = mma::pack2<T>(dp[nt][0], dp[nt][1]);
        *reinterpret_cast<uint32_t*>(&sm.dst[jl + 8][il]) = mma::pack2<T>(dp[nt][2], dp[nt][3]);
      }
      __syncthreads();

      // ---- dQ_i (64 × HD) += dS·K_j: warp w computes query rows [16w, 16w+16), all HD columns.
      //      A = dS, read from dSᵀ with ldmatrix.trans; B = K rows (k = key row) with .trans.
      float dq[HD / 8][4] = {};
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        uint32_t ads[4];
        mma::ldmatrix_x4_trans(ads, &sm.dst[kk * 16 + (lane & 7) + (lane >> 4) * 8]
                                           [warp * 16 + ((lane >> 3) & 1) * 8]);
#pragma unroll
        for (int dn = 0; dn < HD / 16; ++dn) {
          uint32_t bk[4];
          mma::ldmatrix_x4_trans(bk, &sm.k[kk * 16 + (lane & 15)][dn * 16 + (lane >> 4) * 8]);
          mma::mma_16816<T>(dq[2 * dn], ads, bk[0], bk[1]);
          mma::mma_16816<T>(dq[2 * dn + 1], ads, bk[2], bk[3]);
        }
      }
      int* turn = dq_turn_slot(a, b, h, q_blocks, m);
      dq_turn_wait(turn, n);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = i0 + warp * 16 + g + 8 * half;
        if (i < a.seqlen_q) {
          float* acc = a.dq_acc + dq_acc_index(a, b, h, i);
#pragma unroll
          for (int nt = 0; nt < HD / 8; ++nt) {
            atomicAdd(acc + nt * 8 + 2 * t, dq[nt][2 * half]);
            atomicAdd(acc + nt * 8 + 2 * t + 1, dq[nt][2 * half + 1]);
          }
        }
      }
      dq_turn_pass(turn, n);
    }
  }

  // ---- epilogue: dK = c·dK, dV, rounded and stored two elements at a time
  mma::store_dkdv<T, HD>(a, b, hk, j0 + warp * 16, g, t, dk, dv);
}

template <typename T, int HD>
Status launch(const BwdArgs& a, cudaStream_t stream) {
  const dim3 grid((a.seqlen_k + kBlockN - 1) / kBlockN, a.heads_kv, a.batch);
  return learn::launch_with_smem(bwd_v3_kernel<T, HD>, grid, kThreads, sizeof(SmemV3<T, HD>), stream, a);
}

}  // namespace

// As v2 around the kernel: preprocessing, dQ turns per 64-row query block (backward_common.cuh).
Status backward_v3(const BwdParams& p) {
  const int turn_block_m = p.deterministic ? kBlockM : 0;
  return run_with_workspace(p, turn_block_m, Prologue::kPreprocess, [](const BwdArgs& a, cudaStream_t s) {
    return LEARN_DTYPE_SWITCH(a.dtype, T, [&] {
      return LEARN_HDIM_SWITCH(a.head_dim, kHeadDim, [&] { return launch<T, kHeadDim>(a, s); });
    });
  });
}

}  // namespace learn_bwd
}  // namespace flashlab
