// tests/test_fast_div.cpp — common::FastDiv (src/cuda/common/fast_div.h), the multiply-high
// division the KV append's index math uses on the GPU, checked on the CPU (the same code: only the
// 32-bit multiply-high differs, __umulhi there, a 64-bit product here) against / and %.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "cuda/common/fast_div.h"

namespace {

using flashlab::common::FastDiv;

void expect_exact(int d, int n) {
  const FastDiv f(d);
  int rem = -1;
  const int q = f.divmod(n, &rem);
  ASSERT_EQ(q, n / d) << n << " / " << d;
  ASSERT_EQ(rem, n % d) << n << " % " << d;
}

// The dividends where a wrong multiplier or shift shows first: 0, around multiples of d, and the
// top of the range (the method is exact only for n < 2^31).
std::vector<int> edge_dividends(int d) {
  std::vector<int> v;
  const int64_t top = (int64_t(INT32_MAX) / d) * d;  // the last multiple of d in range
  for (int64_t m : {int64_t(0), int64_t(d), int64_t(2) * d, int64_t(1000) * d, top - d, top, int64_t(INT32_MAX)})
    for (int64_t delta : {-1, 0, 1})
      if (m + delta >= 0 && m + delta <= INT32_MAX) v.push_back(static_cast<int>(m + delta));
  return v;
}

TEST(FastDiv, SmallDivisorsEveryEdge) {
  for (int d = 1; d <= 4096; ++d)
    for (int n : edge_dividends(d)) expect_exact(d, n);
}

TEST(FastDiv, LargeAndPowerOfTwoDivisors) {
  std::vector<int> ds = {65535, 65536, 65537, (1 << 20) + 1, (1 << 24) - 3, 1 << 30, (1 << 30) + 7, INT32_MAX - 1,
                         INT32_MAX};
  for (int s = 0; s < 31; ++s) ds.push_back(1 << s);
  for (int d : ds)
    for (int n : edge_dividends(d)) expect_exact(d, n);
}

TEST(FastDiv, RandomDividendsAndDivisors) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> any(0, INT32_MAX);
  std::uniform_int_distribution<int> divisor(1, 1 << 16);
  for (int i = 0; i < 200000; ++i) {
    const int d = i % 2 ? divisor(rng) : 1 + any(rng) % INT32_MAX;
    expect_exact(d, any(rng));
  }
}

// A wrong magic number must fail the checks above: an off-by-one multiplier for d = 7 gives a
// wrong quotient somewhere in the edge set.
TEST(FastDiv, TheCheckCanFail) {
  FastDiv f(7);
  f.mul -= 1;  // round down instead of up
  bool wrong = false;
  for (int n : edge_dividends(7)) wrong = wrong || f.div(n) != n / 7;
  EXPECT_TRUE(wrong);
}

}  // namespace
