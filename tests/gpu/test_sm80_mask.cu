// tests/gpu/test_sm80_mask.cu — host-only checks of cuda_sm80's block skipping and row bounds.
//
// The kernel visits only key blocks KeyBlockRange says can hold a visible key, skips the
// per-score mask on blocks it says every row sees entirely, and masks the rest with
// relative_key_bounds(). These are integer functions of (lengths, alignment, window, block), so
// they are checked here exhaustively against flashlab::key_visible() — the definition every backend
// shares — for every CTA and key block of many shapes: both causal alignments, seqlen_q > seqlen_k
// and < (rows that see nothing), windows on either side, empty sequences, and each tile shape of
// tile_size.h.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

#include "cuda/sm80/mask.h"
#include "cuda/sm80/tile_size.h"
#include "flashlab/mask.h"

namespace {

using flashlab::AttentionConfig;
using flashlab::CausalAlign;
using flashlab::RowMask;
using flashlab::sm80::FwdTile;
using flashlab::sm80::KeyBlockRange;
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

// ScoreParams as api_sm80.cpp builds them (through make_row_mask, so causal becomes right = 0).
ScoreParams score_params(const Case& c) {
  AttentionConfig cfg;
  cfg.causal = c.causal;
  cfg.causal_align = c.bottom_right ? CausalAlign::kBottomRight : CausalAlign::kTopLeft;
  cfg.window_left = c.left;
  cfg.window_right = c.right;
  const RowMask rm = flashlab::make_row_mask(cfg, c.q_len, c.k_len);
  ScoreParams p;
  p.bottom_right = c.bottom_right;
  p.window_left = rm.left;
  p.window_right = rm.right;
  return p;
}

template <int kBlockM, int kBlockN>
void check_case(const Case& c) {
  SCOPED_TRACE(c.describe() + " tile " + std::to_string(kBlockM) + "x" + std::to_string(kBlockN));
  const ScoreParams p = score_params(c);
  AttentionConfig cfg;
  cfg.causal = c.causal;
  cfg.causal_align = c.bottom_right ? CausalAlign::kBottomRight : CausalAlign::kTopLeft;
  cfg.window_left = c.left;
  cfg.window_right = c.right;
  const RowMask ref = flashlab::make_row_mask(cfg, c.q_len, c.k_len);
  const int n_blocks = (c.k_len + kBlockN - 1) / kBlockN;
  for (int m_block = 0; m_block * kBlockM < c.q_len; ++m_block) {
    FwdTile t;
    t.m_block = m_block;
    t.q_len = c.q_len;
    t.k_len = c.k_len;
    const KeyBlockRange<kBlockM, kBlockN> range(p, t);
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
        ASSERT_TRUE(n >= range.n_min && n < range.n_max)
            << "m_block " << m_block << ": key block " << n << " holds a visible key but is skipped";
      }
      if (n >= range.n_min && n < range.n_max && !range.needs_mask(n)) {
        ASSERT_TRUE(block_full) << "m_block " << m_block << ": key block " << n << " is left unmasked";
      }
    }
    ASSERT_EQ(range.empty(), !any_visible) << "m_block " << m_block;

    // The per-row bounds the hook uses, for every row of the CTA (rows past q_len included: they
    // are computed and discarded) and columns of each visited block plus a margin.
    const RowMask m = flashlab::sm80::sequence_mask(p, t);
    for (int i = m_block * kBlockM; i < (m_block + 1) * kBlockM; ++i)
      for (int n = range.n_min; n < range.n_max; ++n) {
        const int j0 = n * kBlockN + 6;  // a thread's first column is any offset inside the block
        int lo_rel, hi_rel;
        flashlab::sm80::relative_key_bounds(m, i, c.k_len, j0, &lo_rel, &hi_rel);
        for (int dj = -6; dj < kBlockN; ++dj) {
          const int j = j0 + dj;
          const bool kept = !(dj < lo_rel || dj > hi_rel);
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
  check_tile<64, false>(c);   // 128 x 128
  check_tile<128, true>(c);   // 128 x 32
  check_tile<256, false>(c);  // 64 x 64
}

TEST(Sm80Mask, Handpicked) {
  const Case cases[] = {
      {1, 1, false, true, -1, -1},     {1, 300, true, false, -1, -1},  {300, 1, true, true, -1, -1},
      {300, 1, true, false, -1, -1},   {203, 113, true, true, -1, -1}, {113, 203, true, true, -1, -1},
      {113, 203, true, false, -1, -1}, {256, 256, true, true, -1, -1}, {1023, 1023, false, true, 64, 0},
      {500, 700, false, true, 0, 0},   {700, 500, false, false, 5, 7}, {129, 1000, false, true, -1, 100},
      {0, 10, true, true, -1, -1},     {10, 0, false, true, -1, -1},   {64, 64, true, true, 0, -1},
  };
  for (const Case& c : cases) check_all_tiles(c);
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
    check_all_tiles(c);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
