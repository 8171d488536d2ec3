// tests/gpu/test_sm80_bwd_mask.cu — host-only checks of cuda_sm80's backward block skipping.
//
// A main-kernel CTA owns one key block and visits only the query blocks QueryBlockRange names;
// per (query block, key block) pair it skips the per-element mask when KeyBlockRange::needs_mask()
// says every row sees every key. Both are integer functions of (lengths, alignment, window, block),
// checked here exhaustively against flashlab::key_visible() for each backward tile shape of
// bwd_tile_size.h: the range must be exactly the query blocks holding a visible pair (a block
// skipped wrongly loses gradient; one visited needlessly would only cost time, but the closed form
// promises exactness, so it is checked), and no block with a masked pair may skip the mask.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>

#include "cuda/sm80/bwd_mask.h"
#include "cuda/sm80/bwd_tile_size.h"
#include "flashlab/mask.h"

namespace {

using flashlab::AttentionConfig;
using flashlab::CausalAlign;
using flashlab::RowMask;
using flashlab::sm80::FwdTile;
using flashlab::sm80::KeyBlockRange;
using flashlab::sm80::QueryBlockRange;
using flashlab::sm80::ScoreParams;

struct Case {
  int q_len, k_len;
  bool causal, bottom_right;
  int64_t left, right;
  std::string describe() const {
    return "sq " + std::to_string(q_len) + " sk " + std::to_string(k_len) + (causal ? " causal" : "") +
           (bottom_right ? " br" : " tl") + " window " + std::to_string(left) + "," + std::to_string(right);
  }
};

AttentionConfig config(const Case& c) {
  AttentionConfig cfg;
  cfg.causal = c.causal;
  cfg.causal_align = c.bottom_right ? CausalAlign::kBottomRight : CausalAlign::kTopLeft;
  cfg.window_left = c.left;
  cfg.window_right = c.right;
  return cfg;
}

template <int kBlockM, int kBlockN>
void check_case(const Case& c) {
  SCOPED_TRACE(c.describe() + " tile " + std::to_string(kBlockM) + "x" + std::to_string(kBlockN));
  const RowMask ref = flashlab::make_row_mask(config(c), c.q_len, c.k_len);
  ScoreParams p;  // as api_sm80.cpp builds it: causal already folded into right = 0
  p.bottom_right = c.bottom_right;
  p.window_left = ref.left;
  p.window_right = ref.right;
  FwdTile t;
  t.q_len = c.q_len;
  t.k_len = c.k_len;
  const int m_blocks = (c.q_len + kBlockM - 1) / kBlockM;
  for (int n = 0; n * kBlockN < c.k_len; ++n) {
    const QueryBlockRange<kBlockM, kBlockN> range(p, t, n);
    int want_min = m_blocks, want_max = -1;
    for (int m = 0; m < m_blocks; ++m) {
      bool any = false, full = true;
      for (int i = m * kBlockM; i < std::min(c.q_len, (m + 1) * kBlockM); ++i)
        for (int j = n * kBlockN; j < (n + 1) * kBlockN; ++j) {
          const bool vis = j < c.k_len && flashlab::key_visible(ref, i, j);
          any |= vis;
          full &= vis;
        }
      if (any) {
        want_min = std::min(want_min, m);
        want_max = std::max(want_max, m);
      }
      t.m_block = m;
      if (m >= range.m_min && m < range.m_max && !KeyBlockRange<kBlockM, kBlockN>(p, t).needs_mask(n)) {
        ASSERT_TRUE(full) << "key block " << n << ", query block " << m << " is left unmasked";
      }
    }
    if (want_max < 0) {
      ASSERT_TRUE(range.empty()) << "key block " << n << ": no row sees it, range [" << range.m_min << ", "
                                 << range.m_max << ")";
    } else {
      ASSERT_EQ(range.m_min, want_min) << "key block " << n;
      ASSERT_EQ(range.m_max, want_max + 1) << "key block " << n;
    }
  }
}

template <int kHeadDim, bool kLarge = false>
void check_tile(const Case& c) {
  constexpr flashlab::sm80::BwdTileSize t = flashlab::sm80::bwd_tile_size(kHeadDim, kLarge);
  check_case<t.block_m, t.block_n>(c);
}

void check_all_tiles(const Case& c) {
  check_tile<64>(c);         // 64 x 128
  check_tile<128>(c);        // 64 x 64
  check_tile<192>(c);        // 32 x 64
  check_tile<256>(c);        // 32 x 32
  check_tile<64, true>(c);   // 128 x 128 (large set)
  check_tile<128, true>(c);  // 64 x 128 (large set)
}

TEST(Sm80BwdMask, Handpicked) {
  const Case cases[] = {
      {1, 1, false, true, -1, -1},     {1, 300, true, false, -1, -1},  {300, 1, true, true, -1, -1},
      {300, 1, true, false, -1, -1},   {203, 113, true, true, -1, -1}, {113, 203, true, true, -1, -1},
      {113, 203, true, false, -1, -1}, {256, 256, true, true, -1, -1}, {1023, 1023, false, true, 64, 0},
      {500, 700, false, true, 0, 0},   {700, 500, false, false, 5, 7}, {129, 1000, false, true, -1, 100},
      {0, 10, true, true, -1, -1},     {10, 0, false, true, -1, -1},   {64, 64, true, true, 0, -1},
  };
  for (const Case& c : cases) check_all_tiles(c);
}

TEST(Sm80BwdMask, Random) {
  std::mt19937_64 rng(13);
  auto pick = [&](std::initializer_list<int64_t> v) {
    return *(v.begin() + std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng));
  };
  for (int it = 0; it < 300; ++it) {
    Case c;
    c.q_len = static_cast<int>(pick({0, 1, 2, 17, 63, 64, 65, 113, 128, 203, 300, 517}));
    c.k_len = static_cast<int>(pick({1, 2, 17, 63, 64, 65, 113, 128, 203, 300, 517}));
    c.causal = pick({0, 1}) == 1;
    c.bottom_right = pick({0, 1}) == 1;
    c.left = pick({-1, -1, 0, 1, 7, 64, 200});
    c.right = pick({-1, -1, 0, 1, 9, 64, 200});
    check_all_tiles(c);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
