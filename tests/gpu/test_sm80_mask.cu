// tests/gpu/test_sm80_mask.cu — host-only checks of cuda_sm80's block skipping and row bounds.
//
// The kernel visits only key blocks KeyBlockRange says can hold a visible key, skips the
// per-score mask on blocks it says every row sees entirely, and masks the rest with
// relative_key_bounds(). These are integer functions of (lengths, alignment, window, block), so
// they are checked here exhaustively against flashlab::key_visible() — the definition every backend
// shares — for every CTA and key block of many shapes: both causal alignments, seqlen_q > seqlen_k
// and < (rows that see nothing), windows on either side, empty sequences, and each tile shape of
// tile_size.h.
// ScoreHookOnGpu runs the score variant's before_softmax (common::ScoreVariant) itself (skipped without a
// GPU) on known raw scores and compares every element with flashlab::modify_score() and key_visible() in
// float64: softcap, ALiBi, the scale, and the mask, for tiles of both shapes and both alignments.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cuda/common/block_range.h"
#include "cuda/common/variant.h"
#include "cuda/sm80/fragments.h"
#include "cuda/sm80/kernel_traits.h"
#include "cuda/sm80/tile_size.h"
#include "flashlab/mask.h"
#include "mask_cases.h"

namespace {

using flashlab::RowMask;
using flashlab::common::KeyBlockRange;
using flashlab::common::WorkTile;
using ScoreParams = flashlab::common::ScoreArgs;

using Case = flashlab::sm80_test::MaskCase;
using flashlab::sm80_test::handpicked_mask_cases;
using flashlab::sm80_test::reference_mask;
using flashlab::sm80_test::score_params;

template <int kBlockM, int kBlockN>
void check_case(const Case& c) {
  SCOPED_TRACE(c.describe() + " tile " + std::to_string(kBlockM) + "x" + std::to_string(kBlockN));
  const ScoreParams p = score_params(c);
  const RowMask ref = reference_mask(c);
  const int n_blocks = (c.k_len + kBlockN - 1) / kBlockN;
  for (int m_block = 0; m_block * kBlockM < c.q_len; ++m_block) {
    WorkTile t;
    t.m_block = m_block;
    t.q_len = c.q_len;
    t.k_len = c.k_len;
    const KeyBlockRange<kBlockM, kBlockN> range(p, t);
    // With sink tokens the kernel (flash_fwd_kernel.h, kSinks) also visits [0, sink_end), always
    // masked (sink keys included), and the window's blocks from lo_block on.
    const int sink_end = KeyBlockRange<kBlockM, kBlockN>::sink_end(p, t);
    const int lo_block = std::max(range.n_min, sink_end);
    auto visited = [&](int n) { return (n >= lo_block && n < range.n_max) || n < sink_end; };
    const int row_end = std::min(c.q_len, (m_block + 1) * kBlockM);
    bool any_visible = false;
    for (int n = 0; n < n_blocks; ++n) {
      bool block_has_visible = false, block_full = true;
      for (int i = m_block * kBlockM; i < row_end; ++i)
        for (int j = n * kBlockN; j < (n + 1) * kBlockN; ++j) {
          const bool vis = j < c.k_len && flashlab::key_visible(ref, i, j);
          block_has_visible |= vis;
          block_full &= vis;
        }
      any_visible |= block_has_visible;
      if (block_has_visible) {
        ASSERT_TRUE(visited(n)) << "m_block " << m_block << ": key block " << n
                                << " holds a visible key but is skipped";
      }
      if (n >= lo_block && n < range.n_max && !range.needs_mask(n)) {
        ASSERT_TRUE(block_full) << "m_block " << m_block << ": key block " << n << " is left unmasked";
      }
    }
    ASSERT_EQ(sink_end == 0 && range.n_max <= lo_block, !any_visible) << "m_block " << m_block;
    // cuda_sm90's forward walk (SinkKeyBlockWalk, its bounded sink_end): descending, no block
    // twice, every block with a visible key, and the blocks it leaves unmasked seen whole.
    if (c.sink > 0) {
      const flashlab::common::SinkKeyBlockWalk<kBlockM, kBlockN> walk(p, t, range);
      ASSERT_GE(walk.sink_end, sink_end) << "m_block " << m_block;
      std::vector<char> seen(n_blocks + 1, 0);
      int prev = n_blocks + 1;
      for (int n = walk.first; n >= 0; n = walk.next(n)) {
        ASSERT_LT(n, prev) << "m_block " << m_block;
        ASSERT_LT(n, n_blocks) << "m_block " << m_block;
        prev = n;
        seen[n] = 1;
        if (n >= walk.sink_end && !range.needs_mask(n)) {
          for (int i = m_block * kBlockM; i < row_end; ++i)
            for (int j = n * kBlockN; j < (n + 1) * kBlockN; ++j)
              ASSERT_TRUE(j < c.k_len && flashlab::key_visible(ref, i, j))
                  << "m_block " << m_block << ": walk leaves key block " << n << " unmasked";
        }
      }
      for (int n = 0; n < n_blocks; ++n)
        for (int i = m_block * kBlockM; i < row_end && !seen[n]; ++i)
          for (int j = n * kBlockN; j < std::min(c.k_len, (n + 1) * kBlockN); ++j)
            ASSERT_FALSE(flashlab::key_visible(ref, i, j)) << "m_block " << m_block << ": walk skips key block " << n;
    }
    // The forward's loop split: [unmasked_begin, unmasked_end) is exactly the blocks needs_mask()
    // lets through, so the three loops together visit [n_min, n_max) once each, masks included.
    const int ub = range.unmasked_begin(), ue = range.unmasked_end();
    ASSERT_LE(ub, ue) << "m_block " << m_block;
    if (!range.empty()) ASSERT_TRUE(ub >= range.n_min && ue <= range.n_max) << "m_block " << m_block;
    for (int n = range.n_min; n < range.n_max; ++n)
      ASSERT_EQ(n >= ub && n < ue, !range.needs_mask(n)) << "m_block " << m_block << " key block " << n;

    // The per-row bounds the hook uses, for every row of the CTA (rows past q_len included: they
    // are computed and discarded) and columns of each visited block plus a margin.
    const RowMask m = flashlab::common::sequence_mask(p, t);
    for (int i = m_block * kBlockM; i < (m_block + 1) * kBlockM; ++i)
      for (int n = 0; n < range.n_max; ++n) {
        if (!visited(n)) continue;
        const int j0 = n * kBlockN + 6;  // a thread's first column is any offset inside the block
        int lo_rel, hi_rel;
        flashlab::common::relative_key_bounds(m, i, c.k_len, j0, &lo_rel, &hi_rel);
        const int sink_rel = n < sink_end ? flashlab::common::relative_sink_bound(m, i, j0) : 0;
        for (int dj = -6; dj < kBlockN; ++dj) {
          const int j = j0 + dj;
          const bool kept = !(dj < lo_rel || dj > hi_rel) || (n < sink_end && dj < sink_rel);
          const bool vis = j >= 0 && j < c.k_len && flashlab::key_visible(ref, i, j);
          if (i < c.q_len) ASSERT_EQ(kept, vis) << "row " << i << " key " << j;
        }
      }
  }
}

template <int kHeadDim, bool kDropout>
void check_tile(const Case& c) {
  constexpr flashlab::sm80::FwdTileSize t = flashlab::sm80::fwd_tile_size(kHeadDim, kDropout);
  check_case<t.block_m, t.block_n>(c);
}

void check_all_tiles(const Case& c) {
  check_tile<32, false>(c);   // 128 x 64
  check_tile<64, false>(c);   // 128 x 64
  check_tile<128, true>(c);   // 128 x 32
  check_tile<256, false>(c);  // 64 x 64
}

TEST(Sm80Mask, Handpicked) {
  for (const Case& c : handpicked_mask_cases()) check_all_tiles(c);
}

TEST(Sm80Mask, Random) {
  std::mt19937_64 rng(11);
  auto pick = [&](std::initializer_list<int64_t> v) {
    return *(v.begin() + std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng));
  };
  for (int it = 0; it < 300; ++it) {
    Case c;
    c.q_len = static_cast<int>(pick({1, 2, 17, 63, 64, 65, 113, 128, 203, 300, 517}));
    c.k_len = static_cast<int>(pick({0, 1, 2, 17, 63, 64, 65, 113, 128, 203, 300, 517}));
    c.causal = pick({0, 1}) == 1;
    c.bottom_right = pick({0, 1}) == 1;
    c.left = pick({-1, -1, 0, 1, 7, 64, 200});
    c.right = pick({-1, -1, 0, 1, 9, 64, 200});
    c.sink = pick({0, 0, 1, 4, 70, 200});
    check_all_tiles(c);
    if (HasFatalFailure()) return;
  }
}

// ---- ScoreHook on the GPU ------------------------------------------------------------------------

// Raw score of (row i, key j) fed to the hook: varied, signed, O(1..10).
__host__ __device__ inline float probe_raw(int i, int j) {
  return 0.37f * static_cast<float>((i * 7 + j * 13) % 23) - 4.0f;
}

// One CTA: fills the accumulator with probe_raw at each thread's (row, key), applies the hook, and
// writes the result to out (BLK_M x BLK_N, row-major) at the same coordinates.
template <typename Traits>
__global__ void hook_probe(const ScoreParams p, const WorkTile t, int n_block, bool needs_mask, float* out) {
  using namespace cute;
  constexpr int kM = Traits::kBlockM, kN = Traits::kBlockN;
  typename Traits::TiledMma mma;
  auto thr_mma = mma.get_thread_slice(threadIdx.x);
  Tensor acc = partition_fragment_C(mma, Shape<Int<kM>, Int<kN>>{});   // ((2, 2), MMA_M, MMA_N) fp32
  Tensor s = flashlab::sm80::rowcol_view(acc);                         // (rows, cols)
  Tensor cS = make_identity_tensor(Shape<Int<kM>, Int<kN>>{});         // (BLK_M, BLK_N) -> (row, col)
  Tensor tScS = flashlab::sm80::rowcol_view(thr_mma.partition_C(cS));  // (rows, cols) -> (row, col)
  for (int r = 0; r < size<0>(s); ++r)
    for (int c = 0; c < size<1>(s); ++c)
      s(r, c) = probe_raw(t.m_block * kM + get<0>(tScS(r, c)), n_block * kN + get<1>(tScS(r, c)));
  const flashlab::common::ScoreVariant<Traits::kBlockM, Traits::kBlockN> hook(p, t);
  if (needs_mask) {
    hook.template before_softmax<true>(s, tScS, n_block);
  } else {
    hook.template before_softmax<false>(s, tScS, n_block);
  }
  // The softmax multiplies by softmax_scale_log2() / kLog2e afterwards: fold it in so the probe
  // returns the modified score itself.
  const float post = hook.softmax_scale_log2() / flashlab::common::kLog2e;
  for (int r = 0; r < size<0>(s); ++r)
    for (int c = 0; c < size<1>(s); ++c) out[get<0>(tScS(r, c)) * kN + get<1>(tScS(r, c))] = s(r, c) * post;
}

template <int kHeadDim>
void probe_hook(const Case& c, float softcap, bool alibi, float scale) {
  constexpr flashlab::sm80::FwdTileSize ts = flashlab::sm80::fwd_tile_size(kHeadDim, false);
  using Traits =
      flashlab::sm80::FwdKernelTraits<kHeadDim, ts.block_m, ts.block_n, ts.warps, cutlass::bfloat16_t>;
  constexpr int kM = Traits::kBlockM, kN = Traits::kBlockN;
  ScoreParams p = score_params(c);
  p.softmax_scale = scale;
  p.softcap = softcap;
  const int heads = 4;
  std::vector<float> slopes(2 * heads);
  for (int i = 0; i < 2 * heads; ++i) slopes[i] = std::ldexp(1.0f, -(i + 1));
  float* d_slopes = nullptr;
  float* d_out = nullptr;
  ASSERT_EQ(cudaMalloc(&d_slopes, slopes.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_out, kM * kN * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_slopes, slopes.data(), slopes.size() * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  if (alibi) {
    p.alibi_slopes = d_slopes;
    p.alibi_batch_stride = heads;
  }
  const RowMask ref = flashlab::common::sequence_mask(p, WorkTile{0, 0, 0, c.q_len, c.k_len});
  std::vector<float> out(kM * kN);
  for (int m_block = 0; m_block * kM < c.q_len; ++m_block) {
    for (int n_block = 0; n_block * kN < c.k_len; ++n_block) {
      WorkTile t;
      t.m_block = m_block;
      t.head = 2;
      t.batch = 1;
      t.q_len = c.q_len;
      t.k_len = c.k_len;
      hook_probe<Traits><<<1, Traits::kNThreads>>>(p, t, n_block, /*needs_mask=*/true, d_out);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(out.data(), d_out, out.size() * sizeof(float), cudaMemcpyDeviceToHost),
                cudaSuccess);
      const double slope = alibi ? slopes[1 * heads + 2] : 0.0;
      for (int r = 0; r < kM; ++r) {
        const int i = m_block * kM + r;
        if (i >= c.q_len) continue;
        for (int col = 0; col < kN; ++col) {
          const int j = n_block * kN + col;
          const float got = out[r * kN + col];
          if (j >= c.k_len || !flashlab::key_visible(ref, i, j)) {
            ASSERT_EQ(got, -INFINITY) << "row " << i << " key " << j << " must be masked";
            continue;
          }
          const double want = flashlab::modify_score<double>(double(scale) * probe_raw(i, j), softcap, slope,
                                                             i, j, ref.shift);
          ASSERT_NEAR(got, want, 1e-4 * (1.0 + std::fabs(want)))
              << "row " << i << " key " << j << " raw " << probe_raw(i, j) << " shift " << ref.shift;
        }
      }
    }
  }
  cudaFree(d_slopes);
  cudaFree(d_out);
}

TEST(Sm80Mask, ScoreHookOnGpu) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
  const Case cases[] = {{203, 203, false, true, -1, -1},
                        {17, 300, true, true, -1, -1},
                        {300, 17, false, false, 5, 100},
                        {130, 70, true, false, -1, -1}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.describe());
    for (int variant = 0; variant < 4; ++variant) {
      const float softcap = variant & 1 ? 5.0f : 0.0f;
      const bool alibi = variant & 2;
      SCOPED_TRACE("softcap " + std::to_string(softcap) + (alibi ? " alibi" : ""));
      probe_hook<64>(c, softcap, alibi, 0.125f);   // 128 x 64 tile
      probe_hook<256>(c, softcap, alibi, 0.125f);  // 64 x 64 tile
      probe_hook<128>(c, softcap, alibi, 0.0f);    // scale 0: premultiplied path
      if (HasFatalFailure()) return;
    }
  }
}

}  // namespace
