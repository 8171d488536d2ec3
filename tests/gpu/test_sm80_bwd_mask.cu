// tests/gpu/test_sm80_bwd_mask.cu — host-only checks of cuda_sm80's backward block skipping.
//
// A main-kernel CTA owns one key block and visits only the query blocks QueryBlockRange names;
// per (query block, key block) pair it skips the per-element mask when KeyBlockRange::needs_mask()
// says every row sees every key. Both are integer functions of (lengths, alignment, window, block),
// checked here exhaustively against flashlab::key_visible() for each backward tile shape of
// bwd_tile_size.h: the range must be exactly the query blocks holding a visible pair (a block
// skipped wrongly loses gradient; one visited needlessly would only cost time, but the closed form
// promises exactness, so it is checked), and no block with a masked pair may skip the mask. Also
// the turns of cuda_sm90's deterministic dQ adds, which rank a query block's adders by these ranges.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cuda/common/block_range.h"
#include "cuda/sm80/bwd_tile_size.h"
#include "flashlab/mask.h"
#include "mask_cases.h"

namespace {

using flashlab::RowMask;
using flashlab::common::KeyBlockRange;
using flashlab::common::QueryBlockRange;
using flashlab::common::WorkTile;
using ScoreParams = flashlab::common::ScoreArgs;

using Case = flashlab::sm80_test::MaskCase;
using flashlab::sm80_test::handpicked_mask_cases;
using flashlab::sm80_test::reference_mask;
using flashlab::sm80_test::score_params;

template <int kBlockM, int kBlockN>
void check_case(const Case& c) {
  SCOPED_TRACE(c.describe() + " tile " + std::to_string(kBlockM) + "x" + std::to_string(kBlockN));
  const RowMask ref = reference_mask(c);
  const ScoreParams p = score_params(c);  // as api_sm80.cpp builds it: causal folded into right = 0
  WorkTile t;
  t.q_len = c.q_len;
  t.k_len = c.k_len;
  const int m_blocks = (c.q_len + kBlockM - 1) / kBlockM;
  for (int n = 0; n * kBlockN < c.k_len; ++n) {
    // As the sink-token kernels take it (sm80: kSinks, sm90: the general kernels); a block that may
    // hold sink keys has more rows, all masked.
    const QueryBlockRange<kBlockM, kBlockN> range(p, t, n, /*sinks=*/true);
    const bool sink_block = QueryBlockRange<kBlockM, kBlockN>::sink_block(p, n);
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
      if (!sink_block && m >= range.m_min && m < range.m_max &&
          !KeyBlockRange<kBlockM, kBlockN>(p, t).needs_mask(n)) {
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
  // The deterministic dQ kernel (FlashBwdDqKernel): per query block, the key blocks
  // [lo_block, n_max) and, with sink tokens, [0, sink_end); every block holding a visible pair of
  // its rows must be among them.
  for (int m = 0; m < m_blocks; ++m) {
    t.m_block = m;
    const KeyBlockRange<kBlockM, kBlockN> keys(p, t);
    const int sink_end = KeyBlockRange<kBlockM, kBlockN>::sink_end(p, t);
    const int lo_block = std::max(keys.n_min, sink_end);
    for (int n = 0; n * kBlockN < c.k_len; ++n) {
      bool any = false;
      for (int i = m * kBlockM; i < std::min(c.q_len, (m + 1) * kBlockM); ++i)
        for (int j = n * kBlockN; j < std::min(c.k_len, (n + 1) * kBlockN); ++j) any |= flashlab::key_visible(ref, i, j);
      if (any) {
        ASSERT_TRUE((n >= lo_block && n < keys.n_max) || n < sink_end)
            << "dQ kernel: query block " << m << " skips key block " << n;
      }
    }
  }
  // cuda_sm90's deterministic backward (sm90/flash_bwd_kernel.h, add_in_turn; common::dq_add_turn):
  // the adders to query block m's dq_accum tile are the key blocks whose QueryBlockRange (with
  // sinks) holds m, and each takes as its turn the number of adders above it, so that the turns
  // are 0, 1, ... from the highest block down (a CTA waits only for higher key blocks, launched
  // before it).
  for (int m = 0; m < m_blocks; ++m) {
    t.m_block = m;
    std::vector<int> adders;
    for (int n = 0; n * kBlockN < c.k_len; ++n) {
      const QueryBlockRange<kBlockM, kBlockN> range(p, t, n, /*sinks=*/true);
      if (m >= range.m_min && m < range.m_max) adders.push_back(n);
    }
    for (size_t i = 0; i < adders.size(); ++i) {
      const int n = adders[i];
      ASSERT_EQ((flashlab::common::dq_add_turn<kBlockM, kBlockN>(p, t, n, /*sinks=*/true)),
                static_cast<int>(adders.size() - 1 - i))
          << "sm90 deterministic: query block " << m << ", key block " << n;
      if (p.sink_tokens <= 0) {  // the kernels without sinks: the same turns
        ASSERT_EQ((flashlab::common::dq_add_turn<kBlockM, kBlockN>(p, t, n, /*sinks=*/false)),
                  static_cast<int>(adders.size() - 1 - i))
            << "sm90 deterministic, no sinks: query block " << m << ", key block " << n;
      }
    }
  }
}

template <int kHeadDim, bool kLarge = false>
void check_tile(const Case& c) {
  constexpr flashlab::sm80::BwdTileSize t = flashlab::sm80::bwd_tile_size(
      kHeadDim, kLarge ? flashlab::sm80::BwdTileSet::kLarge : flashlab::sm80::BwdTileSet::kSmall);
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
  for (const Case& c : handpicked_mask_cases()) check_all_tiles(c);
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
    c.sink = pick({0, 0, 1, 4, 70, 200});
    check_all_tiles(c);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
