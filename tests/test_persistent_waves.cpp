// tests/test_persistent_waves.cpp — the Hopper forward's persistent wave rule and tile order
// (src/cuda/common/persistent_waves.h, used by common::PersistentFwdTileScheduler on the GPU),
// checked on the CPU: every tile exactly once, at most one tile per CTA per wave, and causal tiles
// balanced over the CTAs where a plain k * G + c rule would not be.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda/common/persistent_waves.h"

namespace {

using flashlab::common::grouped_tile_coords;
using flashlab::common::wave_tile;
using flashlab::common::wave_tile_coords;

// CTA c's tiles in order, as the kernel's loop visits them (it stops at the first wave without one).
std::vector<std::vector<int64_t>> schedule(int64_t tiles, int ctas) {
  std::vector<std::vector<int64_t>> per_cta(ctas);
  for (int c = 0; c < ctas; ++c)
    for (int k = 0;; ++k) {
      const int64_t t = wave_tile(k, c, ctas);
      if (t >= tiles) break;
      per_cta[c].push_back(t);
    }
  return per_cta;
}

TEST(PersistentWaves, EveryTileOnceOnePerWave) {
  for (int ctas : {1, 2, 3, 7, 8, 132})
    for (int64_t tiles : {int64_t(0), int64_t(1), int64_t(5), int64_t(132), int64_t(133), int64_t(1000), int64_t(2048)}) {
      const auto per_cta = schedule(tiles, ctas);
      std::vector<int> seen(static_cast<size_t>(tiles), 0);
      for (int c = 0; c < ctas; ++c)
        for (size_t k = 0; k < per_cta[c].size(); ++k) {
          const int64_t t = per_cta[c][k];
          ASSERT_GE(t, int64_t(k) * ctas) << "CTA " << c << " tile #" << k << " (" << tiles << " tiles, " << ctas << " CTAs)";
          ASSERT_LT(t, int64_t(k + 1) * ctas) << "CTA " << c << " tile #" << k;
          ++seen[static_cast<size_t>(t)];
        }
      for (int64_t t = 0; t < tiles; ++t) ASSERT_EQ(seen[static_cast<size_t>(t)], 1) << "tile " << t << " of " << tiles;
    }
}

TEST(PersistentWaves, TileOrderLastQueryBlockFirst) {
  EXPECT_EQ(wave_tile_coords(0, 4).m_block, 3);
  EXPECT_EQ(wave_tile_coords(3, 4).m_block, 0);
  EXPECT_EQ(wave_tile_coords(4, 4).m_block, 3);  // the next head starts with its longest tile again
  EXPECT_EQ(wave_tile_coords(7, 1).m_block, 0);
  EXPECT_EQ(wave_tile_coords(9, 4).bh, 2);  // tile 9: (head, sequence) 2, its second query block from the end
  EXPECT_EQ(wave_tile_coords(9, 4).m_block, 2);
}

// A causal tile of query block m visits m + 1 key blocks (seqlen_q = seqlen_k, square blocks): the
// busiest CTA stays within one tile's cost of the average. The grid's shortest causal points:
// 132 SMs, 4 query blocks per head (seqlen 512), 512 or 1024 heads x sequences.
TEST(PersistentWaves, CausalTilesBalance) {
  struct Case { int ctas, m_blocks, heads; };
  for (const Case& cs : {Case{132, 4, 512}, Case{132, 4, 1024}, Case{132, 8, 256}, Case{132, 6, 100}, Case{8, 4, 16}}) {
    const int64_t tiles = int64_t(cs.m_blocks) * cs.heads;
    const auto per_cta = schedule(tiles, cs.ctas);
    int64_t total = 0, busiest = 0;
    for (const auto& list : per_cta) {
      int64_t load = 0;
      for (int64_t t : list) load += wave_tile_coords(static_cast<int>(t), cs.m_blocks).m_block + 1;
      total += load;
      busiest = std::max(busiest, load);
    }
    const double average = double(total) / cs.ctas;
    EXPECT_LE(double(busiest), average + cs.m_blocks)
        << cs.ctas << " CTAs, " << cs.m_blocks << " query blocks x " << cs.heads << " heads: busiest " << busiest
        << ", average " << average;
  }
  // What the rotation prevents: k * G + c puts CTA 0 on query block M - 1 in every wave.
  int64_t plain = 0;
  for (int k = 0; k < 16; ++k) plain += wave_tile_coords(k * 132, 4).m_block + 1;
  EXPECT_EQ(plain, 16 * 4);
}

// The dynamic scheduler's order: every (pair, query block) exactly once; inside a group of `group`
// pairs the query blocks go last first, each over all of the group's pairs; the groups in turn,
// the last one holding the rest; group 1 is the static order.
TEST(PersistentWaves, GroupedOrderEveryTileOnceLongestFirst) {
  for (int m_blocks : {1, 2, 5, 8})
    for (int pairs : {1, 3, 7, 16, 33})
      for (int group : {1, 2, 4, 7, 16, 33}) {
        if (group > pairs) continue;
        const int tiles = m_blocks * pairs;
        std::vector<int> seen(static_cast<size_t>(tiles), 0);
        for (int t = 0; t < tiles; ++t) {
          const auto c = grouped_tile_coords(t, m_blocks, group, pairs);
          ASSERT_GE(c.bh, 0);
          ASSERT_LT(c.bh, pairs);
          ASSERT_GE(c.m_block, 0);
          ASSERT_LT(c.m_block, m_blocks);
          ++seen[static_cast<size_t>(c.bh * m_blocks + c.m_block)];
          // The pair's group, and inside it query blocks never increase from tile to tile.
          const int g = t / (group * m_blocks);
          ASSERT_EQ(c.bh / group, g) << "tile " << t << " (group " << group << ", " << pairs << " pairs)";
          if (t > 0 && (t - 1) / (group * m_blocks) == g) {
            ASSERT_LE(c.m_block, grouped_tile_coords(t - 1, m_blocks, group, pairs).m_block) << "tile " << t;
          }
          if (group == 1) {
            ASSERT_EQ(c.bh, wave_tile_coords(t, m_blocks).bh);
            ASSERT_EQ(c.m_block, wave_tile_coords(t, m_blocks).m_block);
          }
        }
        for (int i = 0; i < tiles; ++i)
          ASSERT_EQ(seen[static_cast<size_t>(i)], 1) << "tile " << i << ": " << m_blocks << " blocks, " << pairs
                                                      << " pairs, group " << group;
      }
  // 3 query blocks, 5 pairs in groups of 2: pairs {0, 1} blocks 2, 2, 1, 1, 0, 0; then {2, 3};
  // then pair 4 alone.
  const auto c7 = grouped_tile_coords(7, 3, 2, 5);  // group 1's second tile: pair 3, block 2
  EXPECT_EQ(c7.bh, 3);
  EXPECT_EQ(c7.m_block, 2);
  const auto c13 = grouped_tile_coords(13, 3, 2, 5);  // the last group's second tile
  EXPECT_EQ(c13.bh, 4);
  EXPECT_EQ(c13.m_block, 1);
}

}  // namespace
