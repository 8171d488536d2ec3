// tests/test_reference.cpp — the float64 reference backend through its API wrappers,
// detail::reference_forward / reference_backward (src/cpu/reference*.cpp), on strided tensors of
// any dtype. The core math is tested in tests/test_reference_core.cpp; here: the wrappers equal the
// core on the rounded inputs, GQA == repeated kv heads, varlen == one call per sequence (lengths 0
// and 1 included), strides and thread counts change no bit, poisoned outputs are fully written,
// dropout is the Philox mask at sequence positions and is reproducible, OOM writes nothing, S and
// P show up in the counted scratch, and results are rounded to the dtype once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "api/backend.h"
#include "common/problem.h"
#include "cpu/reference_core.h"
#include "cpu/reference_io.h"
#include "cpu/scratch.h"
#include "flashlab/flashlab.h"
#include "flashlab/philox.h"
#include "reference_dense.h"
#include "testing/problem.h"

namespace {

using flashlab::BwdParams;
using flashlab::DType;
using flashlab::FwdParams;
using flashlab::Impl;
using flashlab::Status;
using flashlab::StatusCode;
using reference_test::AttentionConfig;
using reference_test::CausalAlign;
using reference_test::kInf;
using reference_test::textbook_visible;
using reference_test::Vec;
namespace ref = flashlab::detail::ref;
namespace ft = flashlab::testing;

// The dispatcher resolves the default scale before calling a backend; so do these helpers.
template <typename P>
P resolved(P p) {
  if (!std::isfinite(p.softmax_scale)) p.softmax_scale = 1.0f / std::sqrt(static_cast<float>(p.head_dim));
  return p;
}

FwdParams fwd(const ft::Problem& pb, int threads = 0) {
  FwdParams p = resolved(pb.fwd_params(Impl::kReference));
  p.num_threads = threads;
  return p;
}
BwdParams bwd(const ft::Problem& pb, int threads = 0) {
  BwdParams p = resolved(pb.bwd_params(Impl::kReference));
  p.num_threads = threads;
  return p;
}

// Poison the outputs (NaN), run, and require success.
void run_forward(ft::Problem& pb, FwdParams p) {
  pb.poison_forward_outputs();
  const Status st = flashlab::detail::reference_forward(p);
  ASSERT_TRUE(st.ok()) << st.to_string();
}
void run_backward(ft::Problem& pb, BwdParams p) {
  pb.poison_backward_outputs();
  const Status st = flashlab::detail::reference_backward(p);
  ASSERT_TRUE(st.ok()) << st.to_string();
}
void run_both(ft::Problem& pb, int threads = 0) {
  run_forward(pb, fwd(pb, threads));
  run_backward(pb, bwd(pb, threads));
}

// Bit patterns of the logical elements (padding excluded), so "equal" means bitwise equal.
std::vector<uint32_t> bits(const ft::HostTensor& t) {
  std::vector<uint32_t> out;
  for (int64_t b = 0; b < t.batch; ++b)
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t h = 0; h < t.heads; ++h)
        for (int64_t d = 0; d < t.dim; ++d) out.push_back(flashlab::float_to_bits(t.get(b, r, h, d)));
  return out;
}
std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> out;
  for (float f : v) out.push_back(flashlab::float_to_bits(f));
  return out;
}
int64_t nonfinite(const ft::HostTensor& t) {
  int64_t n = 0;
  for (uint32_t u : bits(t)) n += (u & 0x7f800000u) == 0x7f800000u;
  return n;
}
void expect_same(const ft::Problem& a, const ft::Problem& b, const char* what) {
  EXPECT_EQ(bits(a.out), bits(b.out)) << what << ": out";
  EXPECT_EQ(bits(a.lse), bits(b.lse)) << what << ": lse";
  EXPECT_EQ(bits(a.dq), bits(b.dq)) << what << ": dq";
  EXPECT_EQ(bits(a.dk), bits(b.dk)) << what << ": dk";
  EXPECT_EQ(bits(a.dv), bits(b.dv)) << what << ": dv";
}

ft::ProblemSpec spec(int64_t batch, int64_t sq, int64_t sk, int64_t hq, int64_t hk, int64_t d, DType dt) {
  ft::ProblemSpec s;
  s.batch = batch;
  s.seqlen_q = sq;
  s.seqlen_k = sk;
  s.heads_q = hq;
  s.heads_kv = hk;
  s.head_dim = d;
  s.dtype = dt;
  return s;
}

TEST(ReferenceApi, PublicEntryPointGivesTheSameBits) {
  ft::ProblemSpec s = spec(2, 17, 33, 4, 2, 24, DType::kBFloat16);
  s.causal = true;
  s.softcap = 5.0f;
  ft::Problem a(s), b(s);
  run_both(a);
  b.poison_forward_outputs();
  b.poison_backward_outputs();
  Status st = flashlab::attention_forward(b.fwd_params(Impl::kReference));  // scale NaN: default
  ASSERT_TRUE(st.ok()) << st.to_string();
  st = flashlab::attention_backward(b.bwd_params(Impl::kReference));
  ASSERT_TRUE(st.ok()) << st.to_string();
  expect_same(a, b, "public API vs detail");
}

// The wrapper = gather into doubles + core + one rounding: recompute that here, independently,
// from HostTensor::get, for a bf16 GQA problem with padded rows, masks, ALiBi and dropout.
TEST(ReferenceApi, EqualsTheCoreOnTheRoundedInputs) {
  ft::ProblemSpec s = spec(2, 113, 203, 6, 2, 72, DType::kBFloat16);  // awkward sizes
  s.causal = true;
  s.causal_align = CausalAlign::kTopLeft;
  s.alibi = true;
  s.dropout_p = 0.2f;
  s.row_pad = 3;
  ft::Problem pb(s);
  run_both(pb);
  const AttentionConfig c = fwd(pb);
  const int64_t D = s.head_dim, sq = s.seqlen_q, sk = s.seqlen_k, group = s.heads_q / s.heads_kv;
  auto rows = [&](const ft::HostTensor& t, int64_t b, int64_t h, int64_t n) {
    Vec x(n * D);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t d = 0; d < D; ++d) x[r * D + d] = t.get(b, r, h, d);
    return x;
  };
  // bf16 keeps 8 significant bits: a correctly rounded value is within 2^-8 relative (2^-9 at
  // the top of a binade); fp32 LSE within 2^-24.
  auto check = [&](const ft::HostTensor& t, int64_t b, int64_t h, const Vec& want, const char* what) {
    for (int64_t r = 0; r < static_cast<int64_t>(want.size()) / D; ++r)
      for (int64_t d = 0; d < D; ++d) {
        const double w = want[r * D + d];
        ASSERT_LE(std::fabs(t.get(b, r, h, d) - w), std::ldexp(std::fabs(w), -8) + 1e-38)
            << what << " b" << b << " h" << h << " r" << r << " d" << d;
      }
  };
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t g = 0; g < s.heads_kv; ++g) {
      const Vec k = rows(pb.k, b, g, sk), v = rows(pb.v, b, g, sk);
      Vec dk(sk * D, 0.0), dv(sk * D, 0.0);
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        const Vec q = rows(pb.q, b, h, sq), dout = rows(pb.dout, b, h, sq);
        Vec S(sq * sk), P(sq * sk), out(sq * D), lse(sq), dq(sq * D);
        const ref::CoreProblem cp = ref::core_problem(c, b, h, sq, sk);
        ref::core_forward(cp, q.data(), k.data(), v.data(), S.data(), P.data(), out.data(), lse.data());
        ref::core_backward(cp, q.data(), k.data(), v.data(), out.data(), dout.data(), P.data(), S.data(),
                           dq.data(), dk.data(), dv.data());
        check(pb.out, b, h, out, "out");
        check(pb.dq, b, h, dq, "dq");
        for (int64_t i = 0; i < sq; ++i) {
          const float got = pb.lse[b * pb.lse_batch_stride + h * pb.lse_head_stride + i];
          if (std::isinf(lse[i])) EXPECT_EQ(got, -std::numeric_limits<float>::infinity());
          else EXPECT_LE(std::fabs(got - lse[i]), std::ldexp(std::fabs(lse[i]), -24) + 1e-45);
        }
      }
      check(pb.dk, b, g, dk, "dk");
      check(pb.dv, b, g, dv, "dv");
    }
}

// GQA and MQA give exactly the MHA result with each kv head repeated for its query heads; dK/dV
// of a kv head is the sum of the repeated heads' gradients.
TEST(ReferenceApi, GqaEqualsMhaWithRepeatedKvHeads) {
  for (int64_t hk : {2, 1}) {
    ft::ProblemSpec s = spec(2, 11, 19, 6, hk, 8, DType::kFloat32);
    s.causal = true;
    s.alibi = true;
    s.dropout_p = 0.25f;
    ft::Problem g(s);
    ft::ProblemSpec sm = s;
    sm.heads_kv = 6;
    ft::Problem m(sm);
    const int64_t group = 6 / hk;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t h = 0; h < 6; ++h)
        for (int64_t d = 0; d < 8; ++d) {
          for (int64_t r = 0; r < 11; ++r) {
            m.q.set(b, r, h, d, g.q.get(b, r, h, d));
            m.dout.set(b, r, h, d, g.dout.get(b, r, h, d));
          }
          for (int64_t r = 0; r < 19; ++r) {
            m.k.set(b, r, h, d, g.k.get(b, r, h / group, d));
            m.v.set(b, r, h, d, g.v.get(b, r, h / group, d));
          }
        }
    run_both(g);
    run_both(m);
    EXPECT_EQ(bits(g.out), bits(m.out)) << "heads_kv " << hk;
    EXPECT_EQ(bits(g.lse), bits(m.lse)) << "heads_kv " << hk;
    EXPECT_EQ(bits(g.dq), bits(m.dq)) << "heads_kv " << hk;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t r = 0; r < 19; ++r)
        for (int64_t kh = 0; kh < hk; ++kh)
          for (int64_t d = 0; d < 8; ++d) {
            double sk = 0, sv = 0, ak = 0, av = 0;
            for (int64_t h = kh * group; h < (kh + 1) * group; ++h) {
              sk += m.dk.get(b, r, h, d);
              sv += m.dv.get(b, r, h, d);
              ak += std::fabs(m.dk.get(b, r, h, d));
              av += std::fabs(m.dv.get(b, r, h, d));
            }
            // fp32 rounding of each term and of the sum: within 2^-22 of the summed magnitudes.
            ASSERT_NEAR(g.dk.get(b, r, kh, d), sk, std::ldexp(ak, -22) + 1e-38);
            ASSERT_NEAR(g.dv.get(b, r, kh, d), sv, std::ldexp(av, -22) + 1e-38);
          }
  }
}

// A variable-length batch equals one call per sequence: same bits, with the dropout offset
// advanced by b * heads_q and the ALiBi slopes of batch entry b. Sequences of length 0 and 1
// included: no keys -> out 0, LSE -inf, dq 0; no queries -> dk = dv = 0.
TEST(ReferenceApi, VarlenEqualsOneCallPerSequence) {
  ft::ProblemSpec s = spec(0, 0, 0, 4, 2, 8, DType::kFloat32);
  s.lens_q = {5, 0, 17, 1, 3};
  s.lens_k = {9, 4, 17, 1, 0};
  s.causal = true;
  s.window_left = 6;
  s.softcap = 3.0f;
  s.dropout_p = 0.2f;
  s.dropout_offset = 3;
  ft::Problem var(s);
  std::vector<float> slopes(5 * 4);
  for (size_t e = 0; e < slopes.size(); ++e) slopes[e] = 0.05f * static_cast<float>(e + 1);
  FwdParams pf = fwd(var);
  BwdParams pbw = bwd(var);
  for (AttentionConfig* c : {static_cast<AttentionConfig*>(&pf), static_cast<AttentionConfig*>(&pbw)}) {
    c->alibi_slopes = slopes.data();
    c->alibi_batch_stride = 4;
  }
  run_forward(var, pf);
  run_backward(var, pbw);
  const float neg_inf = -std::numeric_limits<float>::infinity();

  for (int64_t b = 0; b < 5; ++b) {
    const int64_t q0 = var.cu_seqlens_q[b], k0 = var.cu_seqlens_k[b];
    const int64_t lq = s.lens_q[b], lk = s.lens_k[b];
    if (lk == 0) {  // no keys: every row is fully masked
      for (int64_t r = 0; r < lq; ++r)
        for (int64_t h = 0; h < 4; ++h) {
          EXPECT_EQ(var.lse[h * var.lse_head_stride + q0 + r], neg_inf);
          for (int64_t d = 0; d < 8; ++d) {
            EXPECT_EQ(var.out.get(0, q0 + r, h, d), 0.0f);
            EXPECT_EQ(var.dq.get(0, q0 + r, h, d), 0.0f);
          }
        }
      continue;
    }
    if (lq == 0) {  // no queries: nothing flows into the keys
      for (int64_t r = 0; r < lk; ++r)
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t d = 0; d < 8; ++d) {
            EXPECT_EQ(var.dk.get(0, k0 + r, h, d), 0.0f);
            EXPECT_EQ(var.dv.get(0, k0 + r, h, d), 0.0f);
          }
      continue;
    }
    ft::ProblemSpec one = s;
    one.lens_q.clear();
    one.lens_k.clear();
    one.batch = 1;
    one.seqlen_q = lq;
    one.seqlen_k = lk;
    one.dropout_offset = s.dropout_offset + b * 4;
    ft::Problem sep(one);
    for (int64_t d = 0; d < 8; ++d) {
      for (int64_t r = 0; r < lq; ++r)
        for (int64_t h = 0; h < 4; ++h) {
          sep.q.set(0, r, h, d, var.q.get(0, q0 + r, h, d));
          sep.dout.set(0, r, h, d, var.dout.get(0, q0 + r, h, d));
        }
      for (int64_t r = 0; r < lk; ++r)
        for (int64_t h = 0; h < 2; ++h) {
          sep.k.set(0, r, h, d, var.k.get(0, k0 + r, h, d));
          sep.v.set(0, r, h, d, var.v.get(0, k0 + r, h, d));
        }
    }
    FwdParams sf = fwd(sep);
    BwdParams sb = bwd(sep);
    sf.alibi_slopes = sb.alibi_slopes = slopes.data() + b * 4;
    run_forward(sep, sf);
    run_backward(sep, sb);
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t r = 0; r < lq; ++r) {
        EXPECT_EQ(flashlab::float_to_bits(var.lse[h * var.lse_head_stride + q0 + r]),
                  flashlab::float_to_bits(sep.lse[h * sep.lse_head_stride + r]))
            << "b" << b << " h" << h << " r" << r;
        for (int64_t d = 0; d < 8; ++d) {
          ASSERT_EQ(flashlab::float_to_bits(var.out.get(0, q0 + r, h, d)),
                    flashlab::float_to_bits(sep.out.get(0, r, h, d)));
          ASSERT_EQ(flashlab::float_to_bits(var.dq.get(0, q0 + r, h, d)),
                    flashlab::float_to_bits(sep.dq.get(0, r, h, d)));
        }
      }
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t r = 0; r < lk; ++r)
        for (int64_t d = 0; d < 8; ++d) {
          ASSERT_EQ(flashlab::float_to_bits(var.dk.get(0, k0 + r, h, d)),
                    flashlab::float_to_bits(sep.dk.get(0, r, h, d)));
          ASSERT_EQ(flashlab::float_to_bits(var.dv.get(0, k0 + r, h, d)),
                    flashlab::float_to_bits(sep.dv.get(0, r, h, d)));
        }
  }
}

// Poisoned (NaN) outputs are fully overwritten: every logical element finite, LSE exactly -inf
// on fully masked rows and finite elsewhere, zeros where nothing is visible. The backward pass
// does not read out or lse (the oracle recomputes them): poisoning them changes nothing.
TEST(ReferenceApi, PoisonedOutputsAreFullyWritten) {
  ft::ProblemSpec s = spec(0, 0, 0, 4, 2, 12, DType::kBFloat16);
  s.lens_q = {4, 0, 3, 1, 6};
  s.lens_k = {2, 5, 0, 1, 9};
  s.causal = true;  // bottom-right: sequence 0 (4 queries, 2 keys) has two empty rows
  s.row_pad = 2;
  ft::ProblemSpec s2 = spec(2, 3, 8, 2, 1, 12, DType::kFloat16);
  s2.causal = true;
  s2.causal_align = CausalAlign::kTopLeft;  // keys 3..7 are never visible
  s2.dropout_p = 0.5f;
  ft::ProblemSpec s3 = spec(0, 0, 0, 2, 2, 4, DType::kFloat32);
  s3.lens_q = {0, 0};  // no query at all: only dk = dv = 0 is written
  s3.lens_k = {0, 3};
  for (const ft::ProblemSpec& sp : {s, s2, s3}) {
    ft::Problem pb(sp);
    run_both(pb);
    EXPECT_EQ(nonfinite(pb.out), 0) << sp.describe();
    EXPECT_EQ(nonfinite(pb.dq), 0) << sp.describe();
    EXPECT_EQ(nonfinite(pb.dk), 0) << sp.describe();
    EXPECT_EQ(nonfinite(pb.dv), 0) << sp.describe();
    const AttentionConfig c = fwd(pb);
    const int64_t nb = pb.varlen() ? static_cast<int64_t>(sp.lens_q.size()) : sp.batch;
    for (int64_t b = 0; b < nb; ++b) {
      const flashlab::detail::SeqBounds sb = flashlab::detail::seq_bounds(c, b);
      const int64_t tb = pb.varlen() ? 0 : b;  // HostTensor batch index (packed: 0)
      for (int64_t h = 0; h < sp.heads_q; ++h)
        for (int64_t i = 0; i < sb.q_len; ++i) {
          bool empty = true;
          for (int64_t j = 0; j < sb.k_len; ++j) empty = empty && !textbook_visible(c, sb.q_len, sb.k_len, i, j);
          const float lse = pb.lse[flashlab::detail::lse_offset(c, pb.lse_batch_stride, pb.lse_head_stride, b,
                                                                 sb.q_begin, i, h)];
          if (empty) {
            EXPECT_EQ(lse, -std::numeric_limits<float>::infinity());
            for (int64_t d = 0; d < sp.head_dim; ++d) {
              EXPECT_EQ(pb.out.get(tb, sb.q_begin + i, h, d), 0.0f);
              EXPECT_EQ(pb.dq.get(tb, sb.q_begin + i, h, d), 0.0f);
            }
          } else {
            EXPECT_TRUE(std::isfinite(lse)) << "b" << b << " h" << h << " row " << i;
          }
        }
      for (int64_t h = 0; h < sp.heads_kv; ++h)
        for (int64_t j = 0; j < sb.k_len; ++j) {
          bool seen = false;
          for (int64_t i = 0; i < sb.q_len; ++i) seen = seen || textbook_visible(c, sb.q_len, sb.k_len, i, j);
          if (seen) continue;
          for (int64_t d = 0; d < sp.head_dim; ++d) {
            EXPECT_EQ(pb.dk.get(tb, sb.k_begin + j, h, d), 0.0f);
            EXPECT_EQ(pb.dv.get(tb, sb.k_begin + j, h, d), 0.0f);
          }
        }
    }
    // The backward ignores out and lse: NaN there gives the same gradients.
    ft::Problem again(sp);
    run_forward(again, fwd(again));
    again.poison_forward_outputs();
    run_backward(again, bwd(again));
    EXPECT_EQ(bits(again.dq), bits(pb.dq));
    EXPECT_EQ(bits(again.dk), bits(pb.dk));
    EXPECT_EQ(bits(again.dv), bits(pb.dv));
  }
}

// Padded rows (row_pad) and a head-major layout (batch, head, row, dim) give the same bits as
// contiguous (batch, row, head, dim) tensors.
TEST(ReferenceApi, StridesDoNotChangeTheResult) {
  ft::ProblemSpec s = spec(2, 9, 14, 4, 2, 8, DType::kBFloat16);
  s.causal = true;
  s.dropout_p = 0.1f;
  ft::Problem dense(s);
  s.row_pad = 7;
  ft::Problem padded(s);
  s.row_pad = 0;
  ft::Problem heads(s);
  // Re-lay every tensor of `heads` as (batch, head, row, dim), same values.
  for (ft::HostTensor* t : {&heads.q, &heads.k, &heads.v, &heads.out, &heads.dout, &heads.dq, &heads.dk, &heads.dv}) {
    ft::HostTensor hm = *t;
    hm.row_stride = t->dim;
    hm.head_stride = t->rows * t->dim;
    hm.batch_stride = t->heads * t->rows * t->dim;
    for (int64_t b = 0; b < t->batch; ++b)
      for (int64_t r = 0; r < t->rows; ++r)
        for (int64_t h = 0; h < t->heads; ++h)
          for (int64_t d = 0; d < t->dim; ++d) hm.set(b, r, h, d, t->get(b, r, h, d));
    *t = hm;
  }
  run_both(dense);
  run_both(padded);
  run_both(heads);
  expect_same(dense, padded, "row_pad 7");
  expect_same(dense, heads, "head-major");
}

TEST(ReferenceApi, ThreadCountDoesNotChangeTheResult) {
  ft::ProblemSpec s = spec(3, 21, 10, 6, 3, 8, DType::kFloat32);
  s.causal = true;
  s.alibi = true;
  s.dropout_p = 0.3f;
  ft::Problem one(s), two(s), many(s);
  run_both(one, 1);
  run_both(two, 2);
  run_both(many, 7);
  expect_same(one, two, "1 vs 2 threads");
  expect_same(one, many, "1 vs 7 threads");
}

// Same seed and offset: the same bits. Another seed or offset: another mask.
TEST(ReferenceApi, DropoutIsReproducible) {
  ft::ProblemSpec s = spec(2, 16, 16, 2, 2, 8, DType::kFloat32);
  s.dropout_p = 0.3f;
  ft::Problem a(s), b(s);
  run_both(a);
  run_both(b, 1);
  expect_same(a, b, "same seed");
  for (int which = 0; which < 2; ++which) {
    ft::ProblemSpec s2 = s;
    (which == 0 ? s2.dropout_seed : s2.dropout_offset) += 1;
    ft::Problem c(s2);
    run_both(c);
    EXPECT_NE(bits(a.out), bits(c.out)) << (which == 0 ? "seed" : "offset");
    EXPECT_NE(bits(a.dq), bits(c.dq)) << (which == 0 ? "seed" : "offset");
    EXPECT_EQ(bits(a.lse), bits(c.lse)) << "LSE is that of the undropped softmax";
  }
}

// With identical keys P_ij = 1/seqlen_k, and with one-hot values v_j = e_j the output spells out
// the mask: out_ij = Z_ij / seqlen_k. It must be dropout_keep at (sequence b, query head h, row i
// inside the sequence, col j) with the call's seed and offset, also for a packed batch. The
// backward must use the same mask: dV_j = Σ_h Σ_i Z_hij / seqlen_k · dO_hi.
TEST(ReferenceApi, DropoutMaskIsPhiloxAtSequencePositions) {
  ft::ProblemSpec s = spec(0, 0, 0, 2, 1, 9, DType::kFloat32);
  s.lens_q = {3, 5};
  s.lens_k = {9, 6};
  s.dropout_p = 0.5f;
  s.dropout_seed = 0xfeedbeefcafeULL;
  s.dropout_offset = 7;
  ft::Problem pb(s);
  for (int64_t r = 0; r < pb.k.rows; ++r)
    for (int64_t d = 0; d < 9; ++d) {
      pb.k.set(0, r, 0, d, pb.k.get(0, 0, 0, d));
      pb.v.set(0, r, 0, d, 0.0f);
    }
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t j = 0; j < s.lens_k[b]; ++j) pb.v.set(0, pb.cu_seqlens_k[b] + j, 0, j, 1.0f);
  run_both(pb);
  const uint32_t t = flashlab::dropout_threshold(s.dropout_p);
  int64_t kept = 0, total = 0;
  for (int64_t b = 0; b < 2; ++b) {
    const int64_t lk = s.lens_k[b], q0 = pb.cu_seqlens_q[b], k0 = pb.cu_seqlens_k[b];
    const double kept_value = 1.0 / ((1.0 - s.dropout_p) * lk);
    for (int64_t j = 0; j < lk; ++j) {
      double want_dv[9] = {0};
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t i = 0; i < s.lens_q[b]; ++i) {
          const bool keep = flashlab::dropout_keep(s.dropout_seed, s.dropout_offset, t, b, 2, h, i, j);
          const float got = pb.out.get(0, q0 + i, h, j);
          if (keep) EXPECT_NEAR(got, kept_value, 1e-6 * kept_value) << "b" << b << " h" << h << " i" << i << " j" << j;
          else EXPECT_EQ(got, 0.0f) << "b" << b << " h" << h << " i" << i << " j" << j;
          kept += keep;
          ++total;
          for (int64_t d = 0; d < 9; ++d) want_dv[d] += (keep ? kept_value : 0.0) * pb.dout.get(0, q0 + i, h, d);
        }
      for (int64_t d = 0; d < 9; ++d) EXPECT_NEAR(pb.dv.get(0, k0 + j, 0, d), want_dv[d], 1e-5);
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, total);
}

TEST(ReferenceApi, NullLseIsSkipped) {
  ft::ProblemSpec s = spec(2, 7, 12, 2, 1, 16, DType::kFloat16);
  s.causal = true;
  ft::Problem a(s), b(s);
  run_forward(a, fwd(a));
  FwdParams p = fwd(b);
  p.lse = nullptr;
  run_forward(b, p);
  EXPECT_EQ(bits(a.out), bits(b.out));
  for (float f : b.lse) EXPECT_TRUE(std::isnan(f)) << "lse must not be written when null";
}

// S and P of 2^23 x 2^23 doubles (2^49 bytes) cannot be allocated: kOutOfMemory, nothing written.
// Inputs use stride 0 (one row broadcast), so the test itself needs only the outputs (16 MiB each).
TEST(ReferenceApi, OutOfMemoryWritesNothing) {
  const int64_t n = int64_t{1} << 23;
  const uint16_t kNaN = 0x7fc0;  // bf16 NaN
  std::vector<uint16_t> in(4, flashlab::float_to_bf16(0.5f)), out(n, kNaN), dq(n, kNaN), dk(n, kNaN), dv(n, kNaN);
  std::vector<float> lse(n, std::numeric_limits<float>::quiet_NaN());
  auto cfg = [&](AttentionConfig& c) {
    c.dtype = DType::kBFloat16;
    c.batch = 1;
    c.seqlen_q = c.seqlen_k = n;
    c.heads_q = c.heads_kv = 1;
    c.head_dim = 1;
    c.softmax_scale = 1.0f;
    c.num_threads = 1;
  };
  const flashlab::TensorRef bcast{in.data(), 0, 0, 0, 1};
  auto mut = [&](std::vector<uint16_t>& t) { return flashlab::MutTensorRef{t.data(), n, 1, 1, 1}; };
  FwdParams f;
  cfg(f);
  f.q = f.k = f.v = bcast;
  f.out = mut(out);
  f.lse = lse.data();
  f.lse_batch_stride = f.lse_head_stride = n;
  Status st = flashlab::detail::reference_forward(f);
  EXPECT_EQ(st.code(), StatusCode::kOutOfMemory) << st.to_string();
  EXPECT_NE(st.message().find("reference forward"), std::string::npos) << st.message();
  BwdParams bw;
  cfg(bw);
  bw.q = bw.k = bw.v = bw.out = bw.dout = bcast;
  bw.lse = lse.data();
  bw.lse_batch_stride = bw.lse_head_stride = n;
  bw.dq = mut(dq);
  bw.dk = mut(dk);
  bw.dv = mut(dv);
  st = flashlab::detail::reference_backward(bw);
  EXPECT_EQ(st.code(), StatusCode::kOutOfMemory) << st.to_string();
  for (const std::vector<uint16_t>* t : {&out, &dq, &dk, &dv})
    EXPECT_EQ(std::count(t->begin(), t->end(), kNaN), n) << "an output was written";
  for (float x : lse) ASSERT_TRUE(std::isnan(x)) << "lse was written";
}

// The reference materializes S and P: its counted scratch holds at least 2 · seqlen_q · seqlen_k
// doubles per thread (what the benchmark's peak-memory column shows).
TEST(ReferenceApi, ScratchHoldsTheQuadraticSAndP) {
  ft::ProblemSpec s = spec(1, 96, 160, 2, 2, 8, DType::kFloat32);
  ft::Problem pb(s);
  flashlab::detail::scratch_reset_peak();
  const int64_t before = flashlab::detail::scratch_peak_bytes();
  run_forward(pb, fwd(pb, 1));
  EXPECT_GE(flashlab::detail::scratch_peak_bytes() - before, 2 * 96 * 160 * 8);
  flashlab::detail::scratch_reset_peak();
  run_backward(pb, bwd(pb, 2));
  EXPECT_GE(flashlab::detail::scratch_peak_bytes() - before, 2 * 2 * 96 * 160 * 8);
}

// store_rounded rounds a double to bf16 / fp16 once. A plain double -> float -> bf16 chain rounds
// 1 + 2^-8 + 2^-30 to the float 1 + 2^-8, a bf16 tie, then to even (1): one ulp low.
TEST(ReferenceIo, StoreRoundsOnceFromDouble) {
  auto store = [](DType dt, double x) {
    alignas(4) uint16_t buf[2] = {0, 0};  // room for a float: store_rounded switches on dtype
    ref::store_rounded(dt, buf, x);
    return buf[0];
  };
  auto value = [](DType dt, uint16_t h) {
    return dt == DType::kBFloat16 ? flashlab::bf16_to_float(h) : flashlab::fp16_to_float(h);
  };
  const double bf_x = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  const double hf_x = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -30);
  EXPECT_EQ(value(DType::kBFloat16, store(DType::kBFloat16, bf_x)), 1.0f + std::ldexp(1.0f, -7));
  EXPECT_EQ(value(DType::kBFloat16, store(DType::kBFloat16, -bf_x)), -(1.0f + std::ldexp(1.0f, -7)));
  EXPECT_EQ(value(DType::kFloat16, store(DType::kFloat16, hf_x)), 1.0f + std::ldexp(1.0f, -10));
  // Exact ties stay ties (to even) and exact values stay exact.
  EXPECT_EQ(value(DType::kBFloat16, store(DType::kBFloat16, 1.0 + std::ldexp(1.0, -8))), 1.0f);
  EXPECT_EQ(store(DType::kFloat16, 0.0), 0);
  EXPECT_EQ(value(DType::kFloat16, store(DType::kFloat16, -kInf)), -std::numeric_limits<float>::infinity());
  // Against a brute-force nearest-value check over random doubles: no neighbour is closer.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0.5, 2.0);
  for (int t = 0; t < 20000; ++t) {
    const double x = u(rng);
    for (DType dt : {DType::kBFloat16, DType::kFloat16}) {
      const uint16_t h = store(dt, x);
      const double err = std::fabs(value(dt, h) - x);
      ASSERT_LE(err, std::fabs(value(dt, static_cast<uint16_t>(h + 1)) - x)) << x;
      ASSERT_LE(err, std::fabs(value(dt, static_cast<uint16_t>(h - 1)) - x)) << x;
    }
  }
}

}  // namespace
