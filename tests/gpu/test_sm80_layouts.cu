// tests/gpu/test_sm80_layouts.cu — host-only checks of the CuTe fragment layouts cuda_sm80 relies on.
//
// CuTe layouts are host-evaluable, so these run on any machine (CI has no GPU). They pin down the
// assumptions the kernel's hand-written parts make about the SM80 m16n8k16 accumulator:
//   * rowcol_layout: mode 0 indexes rows, mode 1 columns (softmax row reductions, the mask);
//   * acc_to_a_layout: P's registers, seen as an A operand, hold exactly the (row, key) elements the
//     MMA expects for P·V (compared with partition_A of the same tile);
//   * column pairs (2t, 2t + 1) in mode (1, 0): dropout draws one Philox word group per pair;
//   * column offsets of a thread's scores are the same for every thread (ScoreHook computes
//     j = j0 + compile-time offset);
//   * the quad's first thread (lane % 4 == 0) holds column 0 (it writes LSE);
//   * every (row, col) of the tile is owned by exactly one thread.
// Every tile shape tile_size.h can return is checked, for both dtypes' MMA atoms.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/sm80/fragments.h"
#include "cuda/sm80/kernel_traits.h"
#include "cuda/sm80/tile_size.h"

namespace {

using namespace cute;
using flashlab::sm80::acc_to_a_layout;
using flashlab::sm80::FwdKernelTraits;
using flashlab::sm80::rowcol_layout;

template <typename Traits>
void check_traits() {
  constexpr int kM = Traits::kBlockM, kN = Traits::kBlockN;
  SCOPED_TRACE("D " + std::to_string(Traits::kHeadDim) + " tile " + std::to_string(kM) + "x" +
               std::to_string(kN) + " warps " + std::to_string(Traits::kNWarps));
  typename Traits::TiledMma mma;
  auto cS = make_identity_tensor(Shape<Int<kM>, Int<kN>>{});  // (BLK_M, BLK_N) -> (row, col)
  std::vector<int> owners(kM * kN, 0);
  auto ref = mma.get_thread_slice(0).partition_C(cS);
  auto ref_rc = make_tensor(ref.data(), rowcol_layout(ref.layout()));
  for (int tid = 0; tid < Traits::kNThreads; ++tid) {
    auto thr = mma.get_thread_slice(tid);
    auto tScS = thr.partition_C(cS);                                       // ((2, 2), MMA_M, MMA_N)
    auto rc = make_tensor(tScS.data(), rowcol_layout(tScS.layout()));      // (rows, cols)
    auto as_a = make_tensor(tScS.data(), acc_to_a_layout(tScS.layout()));  // ((2, 2, 2), MMA_M, BLK_N / 16)
    auto tAcA = thr.partition_A(cS);                                       // the A operand of P·V
    ASSERT_EQ(int(size(as_a)), int(size(tAcA)));
    ASSERT_EQ(int(size<0>(rc)), Traits::kRowsPerThread);
    for (int i = 0; i < size<0>(tAcA); ++i)
      for (int m = 0; m < size<1>(tAcA); ++m)
        for (int k = 0; k < size<2>(tAcA); ++k) {
          ASSERT_EQ(int(get<0>(as_a(i, m, k))), int(get<0>(tAcA(i, m, k)))) << "tid " << tid;
          ASSERT_EQ(int(get<1>(as_a(i, m, k))), int(get<1>(tAcA(i, m, k)))) << "tid " << tid;
        }
    for (int r = 0; r < size<0>(rc); ++r)
      for (int c = 0; c < size<1>(rc); ++c) {
        ASSERT_EQ(int(get<0>(rc(r, c))), int(get<0>(rc(r, 0)))) << "a row of rowcol is one tile row";
        ASSERT_EQ(int(get<1>(rc(r, c))), int(get<1>(rc(0, c)))) << "a column of rowcol is one tile column";
        ++owners[get<0>(rc(r, c)) * kN + get<1>(rc(r, c))];
      }
    for (int n = 0; n < size<1, 1>(rc); ++n) {
      const int c0 = get<1>(rc(0, make_coord(0, n))), c1 = get<1>(rc(0, make_coord(1, n)));
      ASSERT_EQ(c0 % 2, 0) << "tid " << tid;
      ASSERT_EQ(c1, c0 + 1) << "tid " << tid;
    }
    for (int c = 0; c < size<1>(rc); ++c)
      ASSERT_EQ(int(get<1>(rc(0, c)) - get<1>(rc(0, 0))), int(get<1>(ref_rc(0, c)) - get<1>(ref_rc(0, 0))))
          << "column offsets differ between threads";
    ASSERT_EQ(get<1>(rc(0, 0)) == 0, tid % 4 == 0) << "tid " << tid;
    for (int r = 0; r < size<0>(rc); ++r)  // a quad shares its rows
      ASSERT_EQ(int(get<0>(rc(r, 0))),
                int(get<0>(mma.get_thread_slice(tid - tid % 4)
                               .partition_C(cS)(make_coord(make_coord(0, r % 2), r / 2, 0)))));
  }
  for (int i = 0; i < kM * kN; ++i) ASSERT_EQ(owners[i], 1) << "element " << i << " of the S tile";
}

template <int kHeadDim, bool kDropout, typename Element>
void check_bucket() {
  constexpr flashlab::sm80::FwdTileSize t = flashlab::sm80::fwd_tile_size(kHeadDim, kDropout);
  check_traits<FwdKernelTraits<kHeadDim, t.block_m, t.block_n, t.warps, Element>>();
}

template <typename Element>
void check_all_buckets() {
  check_bucket<32, false, Element>();
  check_bucket<32, true, Element>();
  check_bucket<64, false, Element>();
  check_bucket<64, true, Element>();
  check_bucket<96, false, Element>();
  check_bucket<96, true, Element>();
  check_bucket<128, false, Element>();
  check_bucket<128, true, Element>();
  check_bucket<192, false, Element>();
  check_bucket<192, true, Element>();
  check_bucket<256, false, Element>();
  check_bucket<256, true, Element>();
}

TEST(Sm80Layouts, AccumulatorViewsBf16) {
  check_all_buckets<cutlass::bfloat16_t>();
}
TEST(Sm80Layouts, AccumulatorViewsFp16) {
  check_all_buckets<cutlass::half_t>();
}

// The shared-memory tiles: every (row, col) has its own address, 16-byte chunks stay contiguous
// (cp.async and ldmatrix move 8 elements at a time), and V's transposed view is the same bytes.
TEST(Sm80Layouts, SharedMemoryTiles) {
  using Traits = FwdKernelTraits<128, 128, 64, 4, cutlass::bfloat16_t>;
  typename Traits::SmemLayoutKV kv;
  typename Traits::SmemLayoutVt vt;
  std::vector<int> seen(Traits::kBlockN * Traits::kHeadDim, 0);
  for (int r = 0; r < Traits::kBlockN; ++r)
    for (int c = 0; c < Traits::kHeadDim; ++c) {
      const int a = kv(r, c);
      ASSERT_GE(a, 0);
      ASSERT_LT(a, int(seen.size()));
      ++seen[a];
      if (c % 8 != 0) ASSERT_EQ(a, kv(r, c - 1) + 1) << "16-byte chunk split at (" << r << ", " << c << ")";
      ASSERT_EQ(int(vt(c, r)), a) << "Vt(" << c << ", " << r << ") is not V(" << r << ", " << c << ")";
    }
  for (int n : seen) ASSERT_EQ(n, 1);
}

}  // namespace
