// tests/test_philox.cpp — Philox-4x32-10 and the dropout keep-mask of include/flashlab/philox.h.
//
// Every backend draws its dropout mask from these functions, so a mistake here would be shared by
// all of them and invisible to the cross-backend tests. Hence: published known answers for the
// generator, exact checks of the integer threshold and of the keying, and statistics of the mask.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <tuple>
#include <vector>

#include "flashlab/philox.h"

namespace {

using flashlab::dropout_keep;
using flashlab::dropout_threshold;
using flashlab::dropout_words;
using flashlab::Philox4;
using flashlab::philox4x32_10;

constexpr double kTwo32 = 4294967296.0;

// ---------------------------------------------------------------------------------------------
// Known answers
// ---------------------------------------------------------------------------------------------

// The three "philox4x32 10" rows of the file tests/kat_vectors of the Random123 distribution
// (D. E. Shaw Research), as quoted verbatim in DEShawResearch/Random123-Boost,
// libs/random/test/test_philox.cpp (commit 916db91a), test_kat_philox4x32:
//   " 00000000 00000000 00000000 00000000 00000000 00000000   6627e8d5 e169c58d bc57ac4c 9b00dbd8"
//   " ffffffff ffffffff ffffffff ffffffff ffffffff ffffffff   408f276d 41c83b0e a20bc7c6 6d5451fd"
//   " 243f6a88 85a308d3 13198a2e 03707344 a4093822 299f31d0   d16cfe09 94fdcceb 5001e420 24126ea1"
// Format: counter[0..3]  key[0..1]  result[0..3].
struct Kat {
  uint32_t ctr[4];
  uint32_t key[2];
  uint32_t want[4];
};
constexpr Kat kKats[] = {
    {{0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u},
     {0x00000000u, 0x00000000u},
     {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
    {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
     {0xffffffffu, 0xffffffffu},
     {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
    {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
     {0xa4093822u, 0x299f31d0u},
     {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
};

TEST(Philox, Random123KnownAnswers) {
  for (const Kat& kat : kKats) {
    Philox4 ctr{{kat.ctr[0], kat.ctr[1], kat.ctr[2], kat.ctr[3]}};
    const Philox4 got = philox4x32_10(ctr, kat.key[0], kat.key[1]);
    for (int w = 0; w < 4; ++w)
      EXPECT_EQ(got.x[w], kat.want[w]) << "counter " << std::hex << kat.ctr[0] << " word " << w;
  }
}

// The worked example of docs/dropout.md: seed 0, offset 0, batch 0, head 0, row 0 is counter 0 with
// key 0, i.e. the first known answer; with p = 0.5 (threshold 2^31) column 0 is dropped, 1-3 kept.
TEST(Philox, WorkedExampleOfTheDocs) {
  const uint32_t t = dropout_threshold(0.5f);
  const bool want[4] = {false, true, true, true};
  for (int64_t col = 0; col < 4; ++col) EXPECT_EQ(dropout_keep(0, 0, t, 0, 1, 0, 0, col), want[col]) << col;
}

// The keying documented in philox.h and docs/dropout.md, built by hand from its definition:
//   key = (lo32(seed), hi32(seed)), bh = offset + batch*heads_q + head,
//   counter = (col/4, row, lo32(bh), hi32(bh)), word = philox(counter, key)[col % 4].
TEST(Philox, DropoutWordsFollowTheDocumentedKeying) {
  const uint64_t seed = 0x0123456789abcdefULL, offset = 0xfffffffffffffff0ULL;  // bh wraps
  const int64_t batch = 3, heads_q = 12, head = 7, row = 1000003, col = 4097;
  const uint64_t bh = offset + 3ULL * 12ULL + 7ULL;
  Philox4 ctr{{static_cast<uint32_t>(col / 4), static_cast<uint32_t>(row), static_cast<uint32_t>(bh),
               static_cast<uint32_t>(bh >> 32)}};
  const Philox4 want = philox4x32_10(ctr, 0x89abcdefu, 0x01234567u);
  const Philox4 got = dropout_words(seed, offset, batch, heads_q, head, row, col);
  for (int w = 0; w < 4; ++w) EXPECT_EQ(got.x[w], want.x[w]) << "word " << w;

  // dropout_keep compares word col % 4 with the threshold.
  const uint32_t t = want.x[col % 4];
  EXPECT_TRUE(dropout_keep(seed, offset, t, batch, heads_q, head, row, col));       // word >= t
  EXPECT_FALSE(dropout_keep(seed, offset, t + 1, batch, heads_q, head, row, col));  // word < t+1
}

TEST(Philox, FourColumnsShareOneCounter) {
  for (int64_t col = 0; col < 64; ++col) {
    const Philox4 a = dropout_words(42, 0, 0, 1, 0, 5, col);
    const Philox4 b = dropout_words(42, 0, 0, 1, 0, 5, col & ~int64_t{3});
    for (int w = 0; w < 4; ++w) ASSERT_EQ(a.x[w], b.x[w]);
  }
}

// Only bh = offset + batch*heads_q + head matters: shifting the offset by heads_q is the same as
// the next batch entry. This is what lets a caller run one sequence of a batch on its own.
TEST(Philox, OffsetAndBatchCombineIntoOneStream) {
  const int64_t heads_q = 8;
  for (int64_t b = 0; b < 4; ++b)
    for (int64_t h = 0; h < heads_q; ++h) {
      const Philox4 a = dropout_words(99, 5, b, heads_q, h, 3, 10);
      const Philox4 c = dropout_words(99, 5 + b * heads_q, 0, heads_q, h, 3, 10);
      for (int w = 0; w < 4; ++w) ASSERT_EQ(a.x[w], c.x[w]);
    }
}

// ---------------------------------------------------------------------------------------------
// The integer threshold
// ---------------------------------------------------------------------------------------------

TEST(DropoutThreshold, EdgeCases) {
  EXPECT_EQ(dropout_threshold(0.0f), 0u);
  EXPECT_EQ(dropout_threshold(-0.0f), 0u);
  EXPECT_EQ(dropout_threshold(-0.5f), 0u);
  EXPECT_EQ(dropout_threshold(std::numeric_limits<float>::quiet_NaN()), 0u);
  EXPECT_EQ(dropout_threshold(0.5f), 2147483648u);   // exactly 2^31
  EXPECT_EQ(dropout_threshold(0.25f), 1073741824u);  // exactly 2^30
  // From the float, not the decimal: 0.1f = 13421773 * 2^-27, so floor(0.1f * 2^32) = 13421773 * 32.
  EXPECT_EQ(dropout_threshold(0.1f), 429496736u);
  EXPECT_EQ(dropout_threshold(std::ldexp(1.0f, -32)), 1u);
  EXPECT_EQ(dropout_threshold(1e-10f), 0u);  // p < 2^-32: nothing can be dropped
  // The largest float below 1 is 1 - 2^-24: threshold 2^32 - 2^8.
  EXPECT_EQ(dropout_threshold(std::nextafter(1.0f, 0.0f)), 4294967040u);
  // p = 1 (rejected by validation) and above clamp to the largest word instead of wrapping.
  EXPECT_EQ(dropout_threshold(1.0f), 4294967295u);
  EXPECT_EQ(dropout_threshold(2.0f), 4294967295u);
  EXPECT_EQ(dropout_threshold(std::numeric_limits<float>::infinity()), 4294967295u);
}

// threshold = floor(p * 2^32): P(word < threshold) is p rounded down to a multiple of 2^-32.
TEST(DropoutThreshold, IsFloorOfPTimesTwoTo32AndMonotone) {
  uint32_t prev = 0;
  for (int i = 1; i < 4096; ++i) {
    const float p = static_cast<float>(i) / 4096.0f * 0.999f;
    const uint32_t t = dropout_threshold(p);
    const double exact = static_cast<double>(p) * kTwo32;
    EXPECT_LE(static_cast<double>(t), exact);
    EXPECT_GT(static_cast<double>(t) + 1.0, exact);
    EXPECT_GE(t, prev);
    prev = t;
  }
  // Threshold 0 keeps everything, whatever the words are.
  for (int64_t col = 0; col < 256; ++col) EXPECT_TRUE(dropout_keep(1, 2, 0u, 0, 1, 0, 0, col));
}

// ---------------------------------------------------------------------------------------------
// Statistics of the mask
// ---------------------------------------------------------------------------------------------

// Over 1024 x 1024 positions of one (batch, head) the kept fraction is 1 - p within 5 sigma, for
// the whole grid and for each of the four lanes (col % 4) that share a Philox call.
TEST(DropoutMask, KeepFractionMatchesOneMinusP) {
  const int64_t n_rows = 1024, n_cols = 1024;
  for (float p : {0.1f, 0.5f, 0.9f}) {
    const uint32_t t = dropout_threshold(p);
    int64_t kept = 0, lane_kept[4] = {0, 0, 0, 0};
    for (int64_t r = 0; r < n_rows; ++r)
      for (int64_t c = 0; c < n_cols; c += 4) {
        const Philox4 w = dropout_words(0xdecafbadULL, 17, 2, 16, 5, r, c);
        for (int l = 0; l < 4; ++l) {
          const bool keep = w.x[l] >= t;
          ASSERT_EQ(keep, dropout_keep(0xdecafbadULL, 17, t, 2, 16, 5, r, c + l));
          kept += keep;
          lane_kept[l] += keep;
        }
      }
    const double q = 1.0 - static_cast<double>(p);
    const double n = static_cast<double>(n_rows * n_cols);
    const double sigma = std::sqrt(q * (1 - q) / n);
    EXPECT_LT(std::fabs(kept / n - q), 5 * sigma) << "p=" << p << " kept " << kept / n;
    for (int l = 0; l < 4; ++l) {
      const double sigma_l = std::sqrt(q * (1 - q) / (n / 4));
      EXPECT_LT(std::fabs(lane_kept[l] / (n / 4) - q), 5 * sigma_l) << "p=" << p << " lane " << l;
    }
  }
}

// Changing any one of (seed, offset, batch, head, row, col) gives a different stream: the words
// differ, and the two masks are statistically independent (P(both kept) = (1-p)^2 within 5 sigma).
TEST(DropoutMask, CoordinatesGiveIndependentStreams) {
  struct Coord {
    uint64_t seed, offset;
    int64_t batch, head, row, col;
  };
  const int64_t heads_q = 4;
  const Coord base{0x5eed, 3, 1, 2, 0, 0};
  const char* names[] = {"seed", "seed.hi32", "offset", "offset.hi32", "batch", "head", "row", "col+4", "col+1"};
  auto shifted = [&](int which, Coord c) {
    switch (which) {
      case 0: c.seed += 1; break;
      case 1: c.seed += uint64_t{1} << 32; break;
      case 2: c.offset += 1000; break;  // past every batch*heads_q + head used here
      case 3: c.offset += uint64_t{1} << 32; break;
      case 4: c.batch += 1; break;
      case 5: c.head += 1; break;
      case 6: c.row += 1; break;
      case 7: c.col += 4; break;  // next Philox counter
      case 8: c.col += 1; break;  // next word of the same counter
    }
    return c;
  };
  const uint32_t t = dropout_threshold(0.5f);
  const int64_t n_rows = 256, n_cols = 256;
  const double n = static_cast<double>(n_rows * n_cols);
  for (int which = 0; which < 9; ++which) {
    int64_t both = 0, equal_words = 0;
    for (int64_t r = 0; r < n_rows; ++r)
      for (int64_t c = 0; c < n_cols; ++c) {
        Coord a = base;
        a.row += r;
        a.col += c * 8;  // stride 8 keeps "col+4" and "col+1" away from the other samples
        const Coord b = shifted(which, a);
        const Philox4 wa = dropout_words(a.seed, a.offset, a.batch, heads_q, a.head, a.row, a.col);
        const Philox4 wb = dropout_words(b.seed, b.offset, b.batch, heads_q, b.head, b.row, b.col);
        equal_words += wa.x[a.col & 3] == wb.x[b.col & 3];
        both += dropout_keep(a.seed, a.offset, t, a.batch, heads_q, a.head, a.row, a.col) &&
                dropout_keep(b.seed, b.offset, t, b.batch, heads_q, b.head, b.row, b.col);
      }
    EXPECT_LE(equal_words, 2) << names[which];  // 32-bit collisions: expected 65536 / 2^32
    const double q = 0.25, sigma = std::sqrt(q * (1 - q) / n);
    EXPECT_LT(std::fabs(both / n - q), 5 * sigma) << names[which] << " P(both kept) = " << both / n;
  }
}

// Across many streams the 128-bit blocks never repeat (a cheap check against a keying that
// ignores one of its inputs for some range).
TEST(DropoutMask, NoRepeatedBlocksAcrossCoordinates) {
  std::set<std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>> seen;
  int64_t count = 0;
  for (uint64_t seed : {0ULL, 1ULL, 0x100000000ULL})
    for (uint64_t offset : {0ULL, 1000ULL})  // bh ranges must not overlap
      for (int64_t b = 0; b < 3; ++b)
        for (int64_t h = 0; h < 3; ++h)
          for (int64_t r = 0; r < 8; ++r)
            for (int64_t c = 0; c < 32; c += 4) {
              const Philox4 w = dropout_words(seed, offset, b, 3, h, r, c);
              seen.insert({w.x[0], w.x[1], w.x[2], w.x[3]});
              ++count;
            }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), count);
}

}  // namespace
