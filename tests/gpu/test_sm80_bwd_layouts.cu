// tests/gpu/test_sm80_bwd_layouts.cu — host-only checks of the layouts cuda_sm80's backward relies on.
//
// CuTe layouts are host-evaluable, so these run on any machine (CI has no GPU). For every bucket's
// BwdKernelTraits (both dtypes' MMA atoms):
//   * each transposed view (Pᵀ/dSᵀ, Qᵀ/dOᵀ, Kᵀ) addresses the same element as the stored tile at the
//     swapped coordinate, and its no-swizzle view has the same shape;
//   * every shared tile is a bijection onto [0, size): tiles laid out back to back cannot overlap;
//   * S/dP accumulators: rowcol mode 0 is rows, mode 1 columns; each (row, col) owned by exactly one
//     thread; column pairs (2t, 2t + 1) in mode (1, 0) (Dropout::keep_bits); kRowsPerThread;
//   * the dK/dV and dQ accumulators (epilogue_bwd.h's write_tile) cover their tiles exactly once.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <cutlass/numeric_types.h>

#include "cuda/sm80/bwd_kernel_traits.h"
#include "cuda/sm80/fragments.h"

namespace {

using namespace cute;
using flashlab::sm80::BwdKernelTraits;
using flashlab::sm80::BwdTileSet;
using flashlab::sm80::rowcol_layout;

// Stored (rows, cols) layout L and its transposed view Lt (cols, rows): Lt(c, r) == L(r, c).
template <typename L, typename Lt, typename LtNoSwizzle>
void check_transposed(const char* what) {
  SCOPED_TRACE(what);
  constexpr int kRows = decltype(size<0>(L{}))::value, kCols = decltype(size<1>(L{}))::value;
  ASSERT_EQ(int(size<0>(Lt{})), kCols);
  ASSERT_EQ(int(size<1>(Lt{})), kRows);
  ASSERT_EQ(int(size<0>(LtNoSwizzle{})), kCols);
  ASSERT_EQ(int(size<1>(LtNoSwizzle{})), kRows);
  std::vector<int> hits(kRows * kCols, 0);
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kCols; ++c) {
      const int off = int(L{}(r, c));
      ASSERT_EQ(int(Lt{}(c, r)), off) << "(" << r << ", " << c << ")";
      ASSERT_TRUE(off >= 0 && off < kRows * kCols) << "offset " << off;
      ++hits[off];
    }
  for (int i = 0; i < kRows * kCols; ++i) ASSERT_EQ(hits[i], 1) << "offset " << i;
}

// Every (row, col) of a (kRows, kCols) accumulator tile owned by exactly one thread.
template <typename TiledMma, int kRows, int kCols>
void check_cover(int threads, const char* what) {
  SCOPED_TRACE(what);
  TiledMma mma;
  auto c = make_identity_tensor(Shape<Int<kRows>, Int<kCols>>{});
  std::vector<int> owners(kRows * kCols, 0);
  for (int tid = 0; tid < threads; ++tid) {
    auto t = mma.get_thread_slice(tid).partition_C(c);
    for (int i = 0; i < size(t); ++i) ++owners[get<0>(t(i)) * kCols + get<1>(t(i))];
  }
  for (int i = 0; i < kRows * kCols; ++i) ASSERT_EQ(owners[i], 1) << "element " << i;
}

template <int kHeadDim, typename Element, BwdTileSet kTileSet = BwdTileSet::kSmall>
void check_traits() {
  using T = BwdKernelTraits<kHeadDim, Element, kTileSet>;
  constexpr int kM = T::kBlockM, kN = T::kBlockN;
  SCOPED_TRACE("D " + std::to_string(kHeadDim) +
               (kTileSet == BwdTileSet::kHopper  ? " hopper"
                : kTileSet == BwdTileSet::kLarge ? " large"
                                                 : " small") +
               " tile " + std::to_string(kM) + "x" + std::to_string(kN));
  check_transposed<typename T::SmemLayoutPdS, typename T::SmemLayoutPdSt,
                   typename T::SmemLayoutPdStNoSwizzle>("P/dS");
  check_transposed<typename T::SmemLayoutQdO, typename T::SmemLayoutQdOt,
                   typename T::SmemLayoutQdOtNoSwizzle>("Q/dO");
  check_transposed<typename T::SmemLayoutKV, typename T::SmemLayoutKt, typename T::SmemLayoutKtNoSwizzle>(
      "K");
  ASSERT_EQ(T::kSmemPdSBytes, kM * kN * 2);
  ASSERT_EQ(T::kSmemQdOBytes, kM * kHeadDim * 2);
  ASSERT_EQ(T::kSmemKVBytes, kN * kHeadDim * 2);

  typename T::TiledMmaSdP mma;
  auto cS = make_identity_tensor(Shape<Int<kM>, Int<kN>>{});
  std::vector<int> owners(kM * kN, 0);
  for (int tid = 0; tid < T::kNThreads; ++tid) {
    auto tScS = mma.get_thread_slice(tid).partition_C(cS);
    auto rc = make_tensor(tScS.data(), rowcol_layout(tScS.layout()));  // (rows, cols)
    ASSERT_EQ(int(size<0>(rc)), T::kRowsPerThread);
    for (int r = 0; r < size<0>(rc); ++r)
      for (int c = 0; c < size<1>(rc); ++c) {
        ASSERT_EQ(int(get<0>(rc(r, c))), int(get<0>(rc(r, 0))));
        ASSERT_EQ(int(get<1>(rc(r, c))), int(get<1>(rc(0, c))));
        ++owners[get<0>(rc(r, c)) * kN + get<1>(rc(r, c))];
      }
    for (int n = 0; n < size<1, 1>(rc); ++n) {
      const int col = get<1>(rc(0, make_coord(0, n)));
      ASSERT_EQ(col % 2, 0) << "tid " << tid;
      ASSERT_EQ(int(get<1>(rc(0, make_coord(1, n)))), col + 1) << "tid " << tid;
    }
  }
  for (int i = 0; i < kM * kN; ++i) ASSERT_EQ(owners[i], 1) << "S element " << i;
  check_cover<typename T::TiledMmadKV, kN, kHeadDim>(T::kNThreads, "dK/dV");
  check_cover<typename T::TiledMmadQ, kM, kHeadDim>(T::kNThreads, "dQ");
}

template <typename Element>
void check_all() {
  check_traits<32, Element>();
  check_traits<64, Element>();
  check_traits<96, Element>();
  check_traits<128, Element>();
  check_traits<192, Element>();
  check_traits<256, Element>();
  check_traits<64, Element, BwdTileSet::kLarge>();
  check_traits<96, Element, BwdTileSet::kLarge>();
  check_traits<128, Element, BwdTileSet::kLarge>();
  check_traits<192, Element, BwdTileSet::kLarge>();
  check_traits<256, Element, BwdTileSet::kLarge>();
  check_traits<256, Element, BwdTileSet::kHopper>();  // the Hopper set differs at D 256 only
}

TEST(Sm80BwdLayouts, Bf16) {
  check_all<cutlass::bfloat16_t>();
}
TEST(Sm80BwdLayouts, Fp16) {
  check_all<cutlass::half_t>();
}

}  // namespace
