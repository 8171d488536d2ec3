// tests/test_reference_core.cpp — the float64 core of the reference backend (ref::core_forward /
// ref::core_backward, src/cpu/reference_core.h) checked against mathematics, on plain doubles:
// closed forms, hand-written mask patterns, an element-by-element textbook oracle, central finite
// differences of the float64 loss for every feature combination (masks, softcap, ALiBi, dropout
// with its fixed mask, GQA), and the expectation of the dropped output.
// The API wrappers around the core are tested in tests/test_reference.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "cpu/reference_core.h"
#include "reference_dense.h"

namespace {

using namespace reference_test;  // NOLINT: test helpers

// =============================================================================================
// Core: closed forms and hand-written masks
// =============================================================================================

TEST(CoreClosedForm, SingleKeyReturnsItsValueExactly) {
  AttentionConfig c = config(1, 1, 5, 0.7);
  c.softcap = 2.0f;
  const float slope[1] = {0.5f};
  c.alibi_slopes = slope;
  const Dense x = random_dense(1, 1, 4, 1, 5, 1);
  Vec out, lse;
  dense_forward(c, 0, x, &out, &lse);
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t d = 0; d < 5; ++d) EXPECT_EQ(out[i * 5 + d], x.v[d]) << "P = 1 exactly, so out = v";
    double raw = 0;
    for (int64_t d = 0; d < 5; ++d) raw += x.q[i * 5 + d] * x.k[d];
    const double scale = 0.7f;  // the scale is a float in the params: compare with that value
    const double s = 2.0 * std::tanh(scale * raw / 2.0) - 0.5 * std::abs(i + (1 - 4) - 0.0);
    EXPECT_NEAR(lse[i], s, 1e-14);
  }
}

TEST(CoreClosedForm, IdenticalKeysAverageTheValues) {
  const int64_t sq = 3, sk = 7, d = 4;
  Dense x = random_dense(1, 1, sq, sk, d, 2);
  for (int64_t j = 1; j < sk; ++j)
    for (int64_t e = 0; e < d; ++e) x.k[j * d + e] = x.k[e];  // every key = key 0
  const AttentionConfig c = config(1, 1, d, 0.5);
  Vec out, lse;
  dense_forward(c, 0, x, &out, &lse);
  for (int64_t i = 0; i < sq; ++i) {
    double s = 0;
    for (int64_t e = 0; e < d; ++e) s += 0.5 * x.q[i * d + e] * x.k[e];
    EXPECT_NEAR(lse[i], std::log(7.0) + s, 1e-14);
    for (int64_t e = 0; e < d; ++e) {
      double mean = 0;
      for (int64_t j = 0; j < sk; ++j) mean += x.v[j * d + e] / sk;
      EXPECT_NEAR(out[i * d + e], mean, 1e-14);
    }
  }
}

// q = [[1,0],[0,1]], k = [[1,0],[0,1],[1,1]], v = [[1,2],[3,4],[5,6]], scale 1:
//   scores row 0 = [1,0,1] -> P = [e,1,e]/(2e+1), out = (6e+3, 8e+4)/(2e+1)
//   scores row 1 = [0,1,1] -> P = [1,e,e]/(2e+1), out = (8e+1, 10e+2)/(2e+1);  LSE = log(2e+1)
TEST(CoreClosedForm, HandComputedTwoByThree) {
  Dense x{1, 1, 2, 3, 2, {1, 0, 0, 1}, {1, 0, 0, 1, 1, 1}, {1, 2, 3, 4, 5, 6}, {0, 0, 0, 0}};
  Vec out, lse;
  dense_forward(config(1, 1, 2, 1.0), 0, x, &out, &lse);
  const double e = std::exp(1.0), z = 2 * e + 1;
  const double want[4] = {(6 * e + 3) / z, (8 * e + 4) / z, (8 * e + 1) / z, (10 * e + 2) / z};
  for (int t = 0; t < 4; ++t) EXPECT_NEAR(out[t], want[t], 1e-15 * std::fabs(want[t]));
  EXPECT_NEAR(lse[0], std::log(z), 1e-15);
  EXPECT_NEAR(lse[1], std::log(z), 1e-15);
}

// The visible pattern (P > 0) and the fully masked rows (out 0, LSE -inf) of a config.
struct MaskCase {
  bool causal;
  CausalAlign align;
  int64_t left, right, sq, sk;
  std::vector<std::string> want;
  int64_t sinks = 0;  // StreamingLLM sink tokens
};

TEST(CoreMask, CausalAlignmentsAndWindowsMatchHandWrittenPatterns) {
  const CausalAlign BR = CausalAlign::kBottomRight, TL = CausalAlign::kTopLeft;
  const MaskCase cases[] = {
      {true, BR, -1, -1, 2, 4, {"1110", "1111"}},  // diagonal ends in the bottom-right corner
      {true, TL, -1, -1, 2, 4, {"1000", "1100"}},  // diagonal starts in the top-left corner
      {true, BR, -1, -1, 4, 2, {"00", "00", "10", "11"}},  // rows above the diagonal see nothing
      {true, TL, -1, -1, 4, 2, {"10", "11", "11", "11"}},
      {false, BR, 2, 1, 6, 6, {"110000", "111000", "111100", "011110", "001111", "000111"}},
      {true, BR, 2, 5, 6, 6, {"100000", "110000", "111000", "011100", "001110", "000111"}},  // right ignored
      {true, BR, 1, -1, 3, 6, {"001100", "000110", "000011"}},
      {true, TL, 1, -1, 3, 6, {"100000", "110000", "011000"}},
      {false, TL, 0, -1, 4, 2, {"11", "01", "00", "00"}},  // left window past the last key
      {false, BR, -1, -1, 3, 2, {"11", "11", "11"}},       // no mask at all
      // sink tokens: the first keys left of the window, never right of the row's bound
      {true, BR, 1, -1, 6, 6, {"100000", "110000", "111000", "111100", "110110", "110011"}, 2},
      {true, BR, 0, -1, 3, 6, {"100100", "100010", "100001"}, 1},
      {true, BR, 1, -1, 4, 2, {"00", "00", "10", "11"}, 2},  // rows that see nothing still see nothing
      {false, TL, 0, 0, 3, 5, {"10000", "11000", "10100"}, 1},
      {true, TL, 1, -1, 3, 4, {"1000", "1100", "1110"}, 3},  // sinks past the diagonal stay hidden
      {false, BR, -1, -1, 2, 3, {"111", "111"}, 2},          // no left window: nothing changes
  };
  for (const MaskCase& mc : cases) {
    AttentionConfig c = config(1, 1, 3, 0.8);
    c.causal = mc.causal;
    c.causal_align = mc.align;
    c.window_left = mc.left;
    c.window_right = mc.right;
    c.sink_tokens = mc.sinks;
    const Dense x = random_dense(1, 1, mc.sq, mc.sk, 3, 3);
    Vec out, lse, P;
    dense_forward(c, 0, x, &out, &lse, &P);
    EXPECT_EQ(pattern(P, mc.sq, mc.sk), mc.want) << "causal " << mc.causal << " align " << int(mc.align)
                                                 << " window (" << mc.left << "," << mc.right << ") sinks "
                                                 << mc.sinks;
    for (int64_t i = 0; i < mc.sq; ++i) {
      const bool empty = mc.want[i].find('1') == std::string::npos;
      EXPECT_EQ(std::isinf(lse[i]) && lse[i] < 0, empty) << "row " << i;
      for (int64_t d = 0; d < 3; ++d) {
        EXPECT_FALSE(std::isnan(out[i * 3 + d]));
        if (empty) {
          EXPECT_EQ(out[i * 3 + d], 0.0);
        }
      }
    }
  }
}

// mask.h's interval arithmetic (visible_keys, sink_keys, key_visible, visible_pairs: the FLOP
// count) against the textbook predicate, element by element, over windows, both alignments,
// seqlen_q <> seqlen_k and sink tokens up to past the last key.
TEST(CoreMask, IntervalsAndPairCountMatchTheTextbook) {
  int n = 0;
  for (int causal = 0; causal < 3; ++causal)
    for (int64_t left : {int64_t(-1), int64_t(0), int64_t(2)})
      for (int64_t right : {int64_t(-1), int64_t(0), int64_t(1)})
        for (int64_t sinks : {int64_t(0), int64_t(1), int64_t(3), int64_t(9)})
          for (auto [sq, sk] : {std::pair<int64_t, int64_t>{4, 2}, {2, 4}, {6, 6}, {7, 3}}) {
            AttentionConfig c = config(1, 1, 2, 1.0);
            c.causal = causal > 0;
            c.causal_align = causal == 2 ? CausalAlign::kTopLeft : CausalAlign::kBottomRight;
            c.window_left = left;
            c.window_right = right;
            c.sink_tokens = sinks;
            const flashlab::RowMask m = flashlab::make_row_mask(c, sq, sk);
            int64_t pairs = 0;
            for (int64_t i = 0; i < sq; ++i)
              for (int64_t j = 0; j < sk; ++j) {
                const bool want = textbook_visible(c, sq, sk, i, j);
                pairs += want ? 1 : 0;
                ASSERT_EQ(flashlab::key_visible(m, i, j), want)
                    << "row " << i << " key " << j << " causal " << causal << " window (" << left << "," << right
                    << ") sinks " << sinks << " sq " << sq << " sk " << sk;
              }
            EXPECT_EQ(flashlab::visible_pairs(m), pairs) << "causal " << causal << " window (" << left << ","
                                                         << right << ") sinks " << sinks << " sq " << sq << " sk " << sk;
            ++n;
          }
  EXPECT_EQ(n, 432);  // 3 masks x 3 x 3 windows x 4 sink counts x 4 shapes
}

TEST(CoreScores, SoftcapThenAlibiThenMask) {
  AttentionConfig c = config(2, 1, 4, 0.9);
  c.softcap = 1.5f;
  const float slopes[2] = {0.25f, 0.75f};
  c.alibi_slopes = slopes;
  c.causal = true;  // bottom-right, sq 3 < sk 5: shift 2
  const Dense x = random_dense(2, 1, 3, 5, 4, 4);
  Vec S(15), P(15), out(12), lse(3);
  const ref::CoreProblem pb = ref::core_problem(c, 0, 1, 3, 5);  // head 1: slope 0.75
  ref::core_forward(pb, &x.q[12], x.k.data(), x.v.data(), S.data(), P.data(), out.data(), lse.data());
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      if (j > i + 2) {
        EXPECT_EQ(S[i * 5 + j], -kInf);
        EXPECT_EQ(P[i * 5 + j], 0.0);
        continue;
      }
      double raw = 0;
      for (int64_t d = 0; d < 4; ++d) raw += x.q[12 + i * 4 + d] * x.k[j * 4 + d];
      const double scale = 0.9f;
      const double want = 1.5 * std::tanh(scale * raw / 1.5) - 0.75 * std::abs(double(i + 2 - j));
      EXPECT_NEAR(S[i * 5 + j], want, 1e-14);
      EXPECT_NEAR(P[i * 5 + j], std::exp(want - lse[i]), 1e-14);
    }
}

// The core against the element-by-element textbook oracle over every forward feature.
TEST(CoreForward, MatchesTextbookOverFeatureCombinations) {
  int n = 0;
  for (int causal = 0; causal < 3; ++causal)
    for (int win = 0; win < 3; ++win)
      for (float cap : {0.0f, 1.5f})
        for (bool alibi : {false, true})
          for (auto [sq, sk] : {std::pair<int64_t, int64_t>{5, 9}, {9, 5}, {1, 1}})
            for (int64_t sinks : {int64_t(0), int64_t(2)}) {
            if (sinks > 0 && win == 0) continue;  // without a left window sink tokens change nothing
            AttentionConfig c = config(4, 2, 6, 0.6);
            c.sink_tokens = sinks;
            c.causal = causal > 0;
            c.causal_align = causal == 2 ? CausalAlign::kTopLeft : CausalAlign::kBottomRight;
            c.window_left = win == 1 ? 2 : win == 2 ? 0 : -1;
            c.window_right = win == 1 ? 1 : -1;
            c.softcap = cap;
            const float slopes[8] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
            if (alibi) {
              c.alibi_slopes = slopes;
              c.alibi_batch_stride = 4;  // read from batch entry 1 below: slopes 0.5..0.8
            }
            const Dense x = random_dense(4, 2, sq, sk, 6, 100 + n++);
            Vec out, lse, want_out, want_lse;
            dense_forward(c, 1, x, &out, &lse);
            textbook_forward(c, 1, x, &want_out, &want_lse);
            for (size_t e = 0; e < out.size(); ++e) ASSERT_NEAR(out[e], want_out[e], 1e-13) << n;
            for (size_t e = 0; e < lse.size(); ++e) {
              if (std::isinf(want_lse[e])) ASSERT_EQ(lse[e], want_lse[e]) << n;
              else ASSERT_NEAR(lse[e], want_lse[e], 1e-13) << n;
            }
          }
}

// =============================================================================================
// Core: backward against central finite differences of the float64 loss
// =============================================================================================

// For every combination of mask, softcap, ALiBi, dropout (its mask is fixed: a function of
// positions only) and sq <> sk, with GQA (4 query heads on 2 kv heads, so dK/dV sum a group),
// the analytic gradients match central differences with relative L2 error below 1e-6.
TEST(CoreBackward, MatchesFiniteDifferencesForEveryFeature) {
  const double h = 1e-5;  // truncation ~h^2, cancellation ~1e-16/h: both far below 1e-6
  int n = 0;
  double worst = 0;
  for (int causal = 0; causal < 3; ++causal)
    for (int win = 0; win < 3; ++win)
      for (float cap : {0.0f, 1.5f})
        for (bool alibi : {false, true})
          for (float p : {0.0f, 0.4f})
            for (auto [sq, sk] : {std::pair<int64_t, int64_t>{5, 7}, {7, 5}})
              for (int64_t sinks : {int64_t(0), int64_t(2)}) {
              if (sinks > 0 && win == 0) continue;  // without a left window sink tokens change nothing
              AttentionConfig c = config(4, 2, 4, 0.7);
              c.sink_tokens = sinks;
              c.causal = causal > 0;
              c.causal_align = causal == 2 ? CausalAlign::kTopLeft : CausalAlign::kBottomRight;
              c.window_left = win == 1 ? 2 : win == 2 ? 1 : -1;
              c.window_right = win == 1 ? 1 : -1;
              c.softcap = cap;
              const float slopes[4] = {0.3f, 0.15f, 0.6f, 0.05f};
              if (alibi) c.alibi_slopes = slopes;
              c.dropout_p = p;
              c.dropout_seed = 1234 + n;
              const int64_t b = 1;  // a non-zero batch index for the dropout key
              Dense x = random_dense(4, 2, sq, sk, 4, 500 + n++);
              Vec dq, dk, dv;
              dense_grads(c, b, x, &dq, &dk, &dv);
              Vec* params[3] = {&x.q, &x.k, &x.v};
              const Vec* grads[3] = {&dq, &dk, &dv};
              for (int t = 0; t < 3; ++t) {
                Vec fd(params[t]->size());
                for (size_t e = 0; e < fd.size(); ++e) {
                  const double x0 = (*params[t])[e];
                  (*params[t])[e] = x0 + h;
                  const double lp = dense_loss(c, b, x);
                  (*params[t])[e] = x0 - h;
                  const double lm = dense_loss(c, b, x);
                  (*params[t])[e] = x0;
                  fd[e] = (lp - lm) / (2 * h);
                }
                const double err = rel_l2(*grads[t], fd);
                worst = std::max(worst, err);
                EXPECT_LT(err, 1e-6) << "case " << n << " tensor " << "qkv"[t] << " causal " << causal
                                     << " win " << win << " cap " << cap << " alibi " << alibi << " p " << p
                                     << " sq " << sq << " sk " << sk << " sinks " << sinks;
              }
            }
  std::printf("  [finite differences] %d cases, worst relative L2 error %.2e\n", n, worst);
}

TEST(CoreBackward, MaskedRowsAndUnseenKeysGetZeroGradients) {
  AttentionConfig c = config(1, 1, 3, 0.8);
  c.causal = true;
  c.causal_align = CausalAlign::kTopLeft;
  c.window_left = 0;  // row i sees key i only: keys 4 and 5 are never seen
  const Dense x = random_dense(1, 1, 4, 6, 3, 7);
  Vec dq, dk, dv;
  dense_grads(c, 0, x, &dq, &dk, &dv);
  for (int64_t d = 0; d < 3; ++d) {
    for (int64_t j = 4; j < 6; ++j) {
      EXPECT_EQ(dk[j * 3 + d], 0.0);
      EXPECT_EQ(dv[j * 3 + d], 0.0);
    }
    for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(dq[i * 3 + d], 0.0) << "one key per row: P = 1, dS = 0";
    EXPECT_NE(dv[0 * 3 + d], 0.0);
  }
}

// =============================================================================================
// Core: dropout
// =============================================================================================

// E[out with dropout] = out without dropout (the 1/(1-p) scaling), checked per element within 5
// standard errors over 400 seeds; Var(out_id) = p/(1-p) Σ_j P_ij² v_jd² for independent keeps.
TEST(CoreDropout, ExpectationIsTheUndroppedOutput) {
  const int64_t sq = 3, sk = 16, d = 4, seeds = 400;
  const double p = 0.3;
  AttentionConfig c = config(1, 1, d, 0.5);
  const Dense x = random_dense(1, 1, sq, sk, d, 8);
  Vec S(sq * sk), P(sq * sk), exact(sq * d), out(sq * d), mean(sq * d, 0.0);
  ref::core_forward(ref::core_problem(c, 0, 0, sq, sk), x.q.data(), x.k.data(), x.v.data(), S.data(),
                    P.data(), exact.data(), nullptr);
  c.dropout_p = static_cast<float>(p);
  for (int64_t s = 0; s < seeds; ++s) {
    c.dropout_seed = 0xabc000 + s;
    ref::core_forward(ref::core_problem(c, 0, 0, sq, sk), x.q.data(), x.k.data(), x.v.data(), S.data(),
                      P.data(), out.data(), nullptr);
    for (int64_t e = 0; e < sq * d; ++e) mean[e] += out[e] / seeds;
  }
  const double pf = static_cast<double>(static_cast<float>(p));
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t e = 0; e < d; ++e) {
      double var = 0;
      for (int64_t j = 0; j < sk; ++j) var += P[i * sk + j] * P[i * sk + j] * x.v[j * d + e] * x.v[j * d + e];
      const double se = std::sqrt(pf / (1 - pf) * var / seeds);
      EXPECT_LT(std::fabs(mean[i * d + e] - exact[i * d + e]), 5 * se) << "row " << i << " dim " << e;
    }
}

// =============================================================================================
// Core: attention sinks
// =============================================================================================

// The loss L = Σ dout ∘ out with head h's sink logit moved by `delta` (in float64: the float
// sink_logits of the config cannot carry a finite-difference step).
double sink_loss(const AttentionConfig& c, int64_t b, const Dense& x, int64_t head, double delta) {
  const int64_t group = x.hq / x.hk;
  Vec S(x.sq * x.sk), P(x.sq * x.sk), out(x.sq * x.d);
  double L = 0.0;
  for (int64_t h = 0; h < x.hq; ++h) {
    ref::CoreProblem pb = ref::core_problem(c, b, h, x.sq, x.sk);
    if (h == head) pb.sink += delta;
    const int64_t g = h / group;
    ref::core_forward(pb, &x.q[h * x.sq * x.d], &x.k[g * x.sk * x.d], &x.v[g * x.sk * x.d], S.data(), P.data(),
                      out.data(), nullptr);
    for (int64_t e = 0; e < x.sq * x.d; ++e) L += x.dout[h * x.sq * x.d + e] * out[e];
  }
  return L;
}

// dL/dsink of every query head (core_dsink on core_forward's exact out and LSE).
Vec dense_dsink(const AttentionConfig& c, int64_t b, const Dense& x) {
  const int64_t group = x.hq / x.hk;
  Vec S(x.sq * x.sk), P(x.sq * x.sk), out(x.sq * x.d), lse(x.sq), ds(x.hq);
  for (int64_t h = 0; h < x.hq; ++h) {
    const ref::CoreProblem pb = ref::core_problem(c, b, h, x.sq, x.sk);
    const int64_t g = h / group;
    ref::core_forward(pb, &x.q[h * x.sq * x.d], &x.k[g * x.sk * x.d], &x.v[g * x.sk * x.d], S.data(), P.data(),
                      out.data(), lse.data());
    ds[h] = ref::core_dsink(pb, out.data(), &x.dout[h * x.sq * x.d], lse.data());
  }
  return ds;
}

// HandComputedTwoByThree with a sink s: one more exp(s) in each row's denominator, nothing more
// in the numerator.
TEST(CoreSinks, HandComputedTwoByThree) {
  Dense x{1, 1, 2, 3, 2, {1, 0, 0, 1}, {1, 0, 0, 1, 1, 1}, {1, 2, 3, 4, 5, 6}, {0, 0, 0, 0}};
  AttentionConfig c = config(1, 1, 2, 1.0);
  const float sink[1] = {0.7f};
  c.sink_logits = sink;
  Vec out, lse;
  dense_forward(c, 0, x, &out, &lse);
  const double e = std::exp(1.0), z = 2 * e + 1 + std::exp(double(0.7f));
  const double want[4] = {(6 * e + 3) / z, (8 * e + 4) / z, (8 * e + 1) / z, (10 * e + 2) / z};
  for (int t = 0; t < 4; ++t) EXPECT_NEAR(out[t], want[t], 1e-15 * std::fabs(want[t]));
  EXPECT_NEAR(lse[0], std::log(z), 1e-15);
  EXPECT_NEAR(lse[1], std::log(z), 1e-15);
  // One key only: P = e^s0 / (e^s0 + e^sink) and out = P · v (the sink's mass goes nowhere).
  Dense y{1, 1, 1, 1, 2, {1, 2}, {0.5, 0.25}, {3, -4}, {0, 0}};
  dense_forward(c, 0, y, &out, &lse);
  const double s0 = 1.0, p0 = std::exp(s0) / (std::exp(s0) + std::exp(double(0.7f)));
  EXPECT_NEAR(out[0], 3 * p0, 1e-15);
  EXPECT_NEAR(out[1], -4 * p0, 1e-15);
  EXPECT_NEAR(lse[0], std::log(std::exp(s0) + std::exp(double(0.7f))), 1e-15);
}

// A row that sees no key keeps its sink: out = 0, LSE = sink, no gradient; a sink of -inf is none.
TEST(CoreSinks, MaskedRowsAndMinusInfinity) {
  AttentionConfig c = config(2, 1, 3, 0.8);
  c.causal = true;  // sq 4 > sk 2, bottom-right: rows 0 and 1 see no key
  const float sinks[2] = {-0.4f, -std::numeric_limits<float>::infinity()};
  c.sink_logits = sinks;
  const Dense x = random_dense(2, 1, 4, 2, 3, 11);
  Vec out, lse;
  dense_forward(c, 0, x, &out, &lse);
  AttentionConfig plain = c;
  plain.sink_logits = nullptr;
  Vec out0, lse0;
  dense_forward(plain, 0, x, &out0, &lse0);
  for (int64_t i = 0; i < 2; ++i) {
    EXPECT_EQ(lse[i], double(sinks[0])) << "row " << i;
    for (int64_t d = 0; d < 3; ++d) EXPECT_EQ(out[i * 3 + d], 0.0);
  }
  for (int64_t i = 2; i < 4; ++i) EXPECT_GT(lse[i], double(sinks[0]));
  for (int64_t e = 0; e < 4 * 3; ++e) EXPECT_EQ(out[4 * 3 + e], out0[4 * 3 + e]) << "head 1: sink -inf = none";
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(lse[4 + i], lse0[4 + i]);
  Vec dq, dk, dv;
  dense_grads(c, 0, x, &dq, &dk, &dv);
  for (int64_t d = 0; d < 2 * 3; ++d) EXPECT_EQ(dq[d], 0.0);
  const Vec ds = dense_dsink(c, 0, x);
  EXPECT_NE(ds[0], 0.0);
  EXPECT_EQ(ds[1], 0.0);
}

// dq, dk, dv with sinks and dL/dsink against central differences, over masks (with fully masked
// rows), softcap, ALiBi, dropout and GQA.
TEST(CoreSinks, MatchFiniteDifferences) {
  const double h = 1e-5;
  int n = 0;
  double worst = 0;
  for (int causal = 0; causal < 3; ++causal)
    for (int win = 0; win < 2; ++win)
      for (int extra = 0; extra < 2; ++extra)
        for (auto [sq, sk] : {std::pair<int64_t, int64_t>{5, 7}, {7, 3}}) {
          AttentionConfig c = config(4, 2, 4, 0.7);
          c.causal = causal > 0;
          c.causal_align = causal == 2 ? CausalAlign::kTopLeft : CausalAlign::kBottomRight;
          c.window_left = win == 1 ? 1 : -1;
          const float slopes[4] = {0.3f, 0.15f, 0.6f, 0.05f};
          if (extra) c.softcap = 1.5f, c.alibi_slopes = slopes, c.dropout_p = 0.3f, c.dropout_seed = 77 + n;
          const float sinks[4] = {0.3f, -1.2f, 2.5f, 0.0f};
          c.sink_logits = sinks;
          Dense x = random_dense(4, 2, sq, sk, 4, 900 + n++);
          Vec dq, dk, dv;
          dense_grads(c, 1, x, &dq, &dk, &dv);
          Vec* params[3] = {&x.q, &x.k, &x.v};
          const Vec* grads[3] = {&dq, &dk, &dv};
          for (int t = 0; t < 3; ++t) {
            Vec fd(params[t]->size());
            for (size_t e = 0; e < fd.size(); ++e) {
              const double x0 = (*params[t])[e];
              (*params[t])[e] = x0 + h;
              const double lp = dense_loss(c, 1, x);
              (*params[t])[e] = x0 - h;
              const double lm = dense_loss(c, 1, x);
              (*params[t])[e] = x0;
              fd[e] = (lp - lm) / (2 * h);
            }
            const double err = rel_l2(*grads[t], fd);
            worst = std::max(worst, err);
            EXPECT_LT(err, 1e-6) << "case " << n << " tensor " << "qkv"[t];
          }
          const Vec ds = dense_dsink(c, 1, x);
          Vec fd(4);
          for (int64_t hd = 0; hd < 4; ++hd)
            fd[hd] = (sink_loss(c, 1, x, hd, h) - sink_loss(c, 1, x, hd, -h)) / (2 * h);
          const double err = rel_l2(ds, fd);
          worst = std::max(worst, err);
          EXPECT_LT(err, 1e-6) << "case " << n << " dsink " << ds[0] << " fd " << fd[0];
        }
  std::printf("  [finite differences, sinks] %d cases, worst relative L2 error %.2e\n", n, worst);
}

}  // namespace
