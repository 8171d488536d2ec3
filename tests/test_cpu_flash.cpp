// tests/test_cpu_flash.cpp — cpu_flash (FlashAttention-2 on the CPU) against the float64 reference.
//
//   Simd*       the pieces with their own numerics: exp2 (ulp error), the branch-free fp16 decode.
//   Sweep*      a randomized sweep, forward and backward, over every feature: seqlens 1, 17, 113,
//               203, 1023 (sq != sk both ways), GQA ratios 1, 2, 8, head dims 1..512, causal in
//               both alignments, windows, softcap, ALiBi, dropout, varlen with empty sequences,
//               padded row strides, attention sinks, StreamingLLM sink tokens, fp32 / fp16 / bf16.
//               FLASHLAB_LONG_TESTS=1 adds many more cases.
//   SinkTokens* the sink tokens' key-block walk, and cpu_flash against float64 over their shapes.
//   Props*      bitwise properties: determinism, thread count, memory layout, O(seqlen) scratch.
//
// Tolerance (STYLE.md rule 10). Inputs are rounded to the dtype once; then
//   exact  float64 results on those inputs, rounded to fp32 only: the forward is the reference
//          (impl kReference) on an fp32 copy of the inputs; the backward is the reference's
//          float64 core with D = rowsum(dO ∘ O) taken from the same dtype `out` that cpu_flash is
//          given (fa2_exact_backward below; for fp32 it is checked against kReference itself);
//   base   `exact` rounded to the dtype: the error of an implementation that stored perfect results;
//   flash  cpu_flash on the dtype tensors;
// and requires, for out, dq, dk, dv, both in max_abs and in rms over all elements:
//   err(flash, exact) <= 2 * err(base, exact) + (dtype_floor + compute_floor) * unit
// where unit = max(max |exact|, the size of one term of the products behind the tensor), so that
// a gradient that cancels to exactly 0 (dq with a single key) still has a scale. For fp16/bf16 the
// baseline dominates: cpu_flash computes in fp32, so its only sizable error is the final rounding,
// like the baseline's; 2x covers the double rounding (fp32, then the dtype). For fp32 the baseline
// is 0 and compute_floor = 1e-5 * (1 + typical |score|) bounds the fp32 arithmetic: a score
// carries an absolute error ~ eps * |s|, i.e. a relative error of P (peaky inputs, |s| ~ 50, show
// it); the sweep uses at most ~0.6 of that tolerance. dtype_floor (fp16 1e-4, bf16 5e-4, ~1/10 of
// their eps) covers outputs whose baseline happens to be tiny.
// Why the backward's exact result uses the given `out`: FA2 computes D from `out`, and with peaky
// softmax rows dP − D cancels almost completely, so the rounding of `out` to bf16 moves dS by far
// more than the output rounding baseline — a property of the algorithm, not an error of cpu_flash.
// LSE is always fp32: |err| <= compute_floor + 1e-5 * |lse| per element; -inf must match exactly.
// A test that cannot fail is a defect: SweepSelfCheck.ToleranceCatchesASmallBug perturbs one
// element of a correct result by 1% of its scale and asserts that the check rejects it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/problem.h"
#include "cpu/cpu_flash_simd.h"
#include "cpu/cpu_flash_tiles.h"
#include "cpu/reference_core.h"
#include "cpu/reference_io.h"
#include "cpu/scratch.h"
#include "flashlab/flashlab.h"
#include "testing/problem.h"

namespace {

using flashlab::BwdParams;
using flashlab::CausalAlign;
using flashlab::DType;
using flashlab::FwdParams;
using flashlab::Impl;
using flashlab::Status;
namespace ft = flashlab::testing;
namespace simd = flashlab::detail::simd;

bool long_tests() {
  const char* e = std::getenv("FLASHLAB_LONG_TESTS");
  return e != nullptr && std::string(e) == "1";
}

// =============================================================================================
// Simd: exp2 and the fp16 decode. This file is compiled without the library's -march, so these run
// the header's narrower instantiation: the same arithmetic per lane as the library's.
// =============================================================================================

double ulp_error(float got, double want) {
  const double ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(want)) - 23);
  return std::fabs(got - want) / ulp;
}

TEST(Simd, Exp2IsWithinTwoUlpsAndExactAtTheEdges) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> dist(-126.0f, 127.0f);
  double worst = 0;
  for (int n = 0; n < 200000; n += simd::kWidth) {
    simd::VecF x;
    for (int i = 0; i < simd::kWidth; ++i) x[i] = n < 1000 ? dist(rng) / 100.0f : dist(rng);
    const simd::VecF y = simd::exp2(x);
    for (int i = 0; i < simd::kWidth; ++i) worst = std::max(worst, ulp_error(y[i], std::exp2(double(x[i]))));
  }
  EXPECT_LE(worst, 2.0) << "exp2 max error in ulps";
  simd::VecF edge{};
  const float special[] = {0.0f, -126.0f, -126.5f, -1000.0f, simd::kNegInf, std::nanf(""), 1.0f, -1.0f};
  for (int i = 0; i < simd::kWidth; ++i) edge[i] = special[i % 8];
  const simd::VecF y = simd::exp2(edge);
  for (int i = 0; i < simd::kWidth; ++i) {
    const float x = special[i % 8];
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(y[i]));
    } else if (x < -126.0f) {
      EXPECT_EQ(y[i], 0.0f) << "exp2(" << x << ") must be exactly 0: masked scores";
    } else {
      EXPECT_EQ(y[i], std::exp2(x)) << "exp2(" << x << ")";
    }
  }
}

TEST(Simd, HalfDecodeMatchesDtypeHForEveryPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float want = flashlab::fp16_to_float(static_cast<uint16_t>(h));
    const float got = flashlab::detail::flash::half_to_float_fast(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
    } else {
      ASSERT_EQ(flashlab::float_to_bits(got), flashlab::float_to_bits(want)) << std::hex << h;
    }
  }
}

// =============================================================================================
// Checking one problem
// =============================================================================================

// Copies the logical elements (padding excluded) of `from` into `to` (same shape, any dtype).
void copy_values(const ft::HostTensor& from, ft::HostTensor& to) {
  for (int64_t b = 0; b < from.batch; ++b)
    for (int64_t r = 0; r < from.rows; ++r)
      for (int64_t h = 0; h < from.heads; ++h)
        for (int64_t d = 0; d < from.dim; ++d) to.set(b, r, h, d, from.get(b, r, h, d));
}

// Padding elements (row_pad) must still hold the poison: cpu_flash writes its elements only.
int64_t padding_written(const ft::HostTensor& t) {
  const int64_t logical = t.heads * t.dim, es = flashlab::dtype_size(t.dtype);
  int64_t n = 0;
  for (int64_t row = 0; row < t.batch * t.rows; ++row)
    for (int64_t e = logical; e < t.row_stride; ++e)
      if (!std::isnan(flashlab::load_as_float(t.dtype, t.bytes.data() + (row * t.row_stride + e) * es))) ++n;
  return n;
}

// The error floors, in units of a tensor's scale (see the file comment):
//   dtype_floor: for outputs whose rounding baseline happens to be tiny (~1/10 of the dtype's eps);
//   compute_floor: fp32 arithmetic. A score s carries an absolute error of ~eps * |s|, which is a
//     relative error of P = exp(s - lse); so the floor grows with the typical score size.
double dtype_floor(DType d) {
  switch (d) {
    case DType::kFloat32: return 0.0;
    case DType::kFloat16: return 1e-4;
    default: return 5e-4;
  }
}
double compute_floor(double score_unit) { return 1e-5 * (1.0 + score_unit); }

// Absolute error statistics over the logical elements (ft::compare's rel_l2 is undefined when the
// exact result is 0, which it is for dq and dk whenever a row sees a single key).
struct AbsError {
  double max_abs = 0, rms = 0;
  int64_t nonfinite = 0;
};
AbsError abs_error(const ft::HostTensor& got, const ft::HostTensor& want) {
  AbsError e;
  double sum = 0;
  int64_t n = 0;
  for (int64_t b = 0; b < want.batch; ++b)
    for (int64_t r = 0; r < want.rows; ++r)
      for (int64_t h = 0; h < want.heads; ++h)
        for (int64_t d = 0; d < want.dim; ++d, ++n) {
          const double g = got.get(b, r, h, d), w = want.get(b, r, h, d), diff = std::fabs(g - w);
          if (!std::isfinite(g)) ++e.nonfinite;
          e.max_abs = std::max(e.max_abs, diff);
          sum += diff * diff;
        }
  e.rms = n ? std::sqrt(sum / n) : 0.0;
  return e;
}

// One tensor's verdict. `term` is the size of one term of the products behind it (see
// term_scale): the unit of its rounding error, even where the exact result cancels to 0.
::testing::AssertionResult within_tolerance(const char* what, const ft::HostTensor& flash,
                                            const ft::HostTensor& base, const ft::HostTensor& exact, double term,
                                            double score_unit) {
  const AbsError e = abs_error(flash, exact);
  const AbsError b = abs_error(base, exact);
  const double unit =
      (dtype_floor(flash.dtype) + compute_floor(score_unit)) * std::max(exact.max_abs_value(), term);
  const double tol_max = 2 * b.max_abs + unit, tol_rms = 2 * b.rms + unit / 4;
  const int64_t pad = padding_written(flash);
  if (std::getenv("FLASHLAB_TEST_VERBOSE"))
    std::printf("  %-3s max %.3g (base %.3g, unit %.3g)  rms %.3g (base %.3g)\n", what, e.max_abs, b.max_abs, unit,
                e.rms, b.rms);
  if (e.nonfinite == 0 && e.max_abs <= tol_max && e.rms <= tol_rms && pad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": flash max_abs " << e.max_abs << " rms " << e.rms << " nonfinite "
                                       << e.nonfinite << " | baseline max_abs " << b.max_abs << " rms " << b.rms
                                       << " | tol max " << tol_max << " rms " << tol_rms << " | padding written "
                                       << pad;
}

// Term sizes: out = P·V sums values; dv = (P∘Z)ᵀ·dO sums rows of dO; dq = scale·dS·K and
// dk = scale·dSᵀ·Q sum products of dS = P∘(dP − D), whose terms are dO·V products.
// score: the typical |s| = scale·|q·k| ~ scale·rms(q)·rms(k)·sqrt(head_dim).
struct TermScales {
  double out, dq, dk, dv, score;
};

double rms_magnitude(const ft::HostTensor& t) {
  double sum = 0;
  int64_t n = 0;
  for (int64_t b = 0; b < t.batch; ++b)
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t h = 0; h < t.heads; ++h)
        for (int64_t d = 0; d < t.dim; ++d, ++n) sum += double(t.get(b, r, h, d)) * t.get(b, r, h, d);
  return n ? std::sqrt(sum / n) : 0.0;
}
TermScales term_scales(const ft::Problem& pb) {
  const ft::ProblemSpec& s = pb.spec;
  const double scale = s.softmax_scale > 0 ? s.softmax_scale : 1.0 / std::sqrt(double(s.head_dim));
  const double q = pb.q.max_abs_value(), k = pb.k.max_abs_value(), v = pb.v.max_abs_value();
  const double dout = pb.dout.max_abs_value();
  const double score = scale * rms_magnitude(pb.q) * rms_magnitude(pb.k) * std::sqrt(double(s.head_dim));
  return TermScales{v, scale * dout * v * k, scale * dout * v * q, dout, score};
}

::testing::AssertionResult lse_within_tolerance(const std::vector<float>& got, const std::vector<float>& want,
                                                const ft::Problem& pb, double score_unit) {
  // Only the elements of real rows: compare_lse would count the unused (poisoned) tail of a varlen
  // LSE buffer as well, so copy the logical ones out first.
  std::vector<float> g, w;
  const int64_t hq = pb.spec.heads_q;
  for (int64_t b = 0; b < pb.spec.batch; ++b) {
    const int64_t begin = pb.varlen() ? pb.cu_seqlens_q[b] : 0;
    const int64_t len = pb.varlen() ? pb.cu_seqlens_q[b + 1] - begin : pb.spec.seqlen_q;
    for (int64_t h = 0; h < hq; ++h)
      for (int64_t i = 0; i < len; ++i) {
        const size_t idx = static_cast<size_t>(pb.varlen() ? h * pb.lse_head_stride + begin + i
                                                           : b * pb.lse_batch_stride + h * pb.lse_head_stride + i);
        g.push_back(got[idx]);
        w.push_back(want[idx]);
      }
  }
  const ft::ErrorStats e = ft::compare_lse(g, w);
  for (size_t i = 0; i < g.size(); ++i) {
    const double tol = compute_floor(score_unit) + 1e-5 * std::fabs(w[i]);
    const bool ok = std::isinf(w[i]) ? g[i] == w[i] : std::fabs(g[i] - w[i]) <= tol;
    if (!ok)
      return ::testing::AssertionFailure() << "lse[" << i << "]: flash " << g[i] << " want " << w[i] << " ("
                                           << e.to_string() << ")";
  }
  return ::testing::AssertionSuccess();
}

Status run_forward(ft::Problem& pb, Impl impl, int threads = 0) {
  FwdParams p = pb.fwd_params(impl);
  p.num_threads = threads;
  return flashlab::attention_forward(p);
}
Status run_backward(ft::Problem& pb, Impl impl, int threads = 0) {
  BwdParams p = pb.bwd_params(impl);
  p.num_threads = threads;
  return flashlab::attention_backward(p);
}

// Float64 gradients with the semantics of every FA2 backward: the reference's core
// (ref::core_forward / core_backward), except that D = rowsum(dO ∘ O) uses pb's own `out` (the
// dtype output cpu_flash is given) where the reference API recomputes the exact O. Results are
// stored into `into` (an fp32 twin of pb). One thread; fine at test sizes. With sinks, into.dsink
// gets dsink from pb's `out` and the recomputed LSE, and *dsink_terms (if set) Σ_i |p_sink_i D_i|
// per head: the scale of dsink's rounding error.
void fa2_exact_backward(const ft::Problem& pb, ft::Problem& into, std::vector<double>* dsink_terms = nullptr) {
  namespace ref = flashlab::detail::ref;
  BwdParams p = pb.bwd_params(Impl::kReference);
  if (!(pb.spec.softmax_scale > 0)) p.softmax_scale = 1.0f / std::sqrt(static_cast<float>(p.head_dim));
  const BwdParams dst = into.bwd_params(Impl::kReference);
  const int64_t d = p.head_dim, group = p.heads_q / p.heads_kv;
  std::fill(into.dsink.begin(), into.dsink.end(), 0.0f);
  if (dsink_terms) dsink_terms->assign(static_cast<size_t>(p.heads_q), 0.0);
  for (int64_t b = 0; b < p.batch; ++b) {
    const flashlab::detail::SeqBounds s = flashlab::detail::seq_bounds(p, b);
    std::vector<double> q(s.q_len * d), out(s.q_len * d), dout(s.q_len * d), o(s.q_len * d), dq(s.q_len * d);
    std::vector<double> k(s.k_len * d), v(s.k_len * d), dk(s.k_len * d), dv(s.k_len * d);
    std::vector<double> S(s.q_len * s.k_len), P(s.q_len * s.k_len), lse(s.q_len);
    for (int64_t hk = 0; hk < p.heads_kv; ++hk) {
      ref::load_rows(p, p.k, b, s.k_begin, s.k_len, hk, k.data());
      ref::load_rows(p, p.v, b, s.k_begin, s.k_len, hk, v.data());
      std::fill(dk.begin(), dk.end(), 0.0);
      std::fill(dv.begin(), dv.end(), 0.0);
      for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        ref::load_rows(p, p.q, b, s.q_begin, s.q_len, h, q.data());
        ref::load_rows(p, p.out, b, s.q_begin, s.q_len, h, out.data());
        ref::load_rows(p, p.dout, b, s.q_begin, s.q_len, h, dout.data());
        const ref::CoreProblem cp = ref::core_problem(p, b, h, s.q_len, s.k_len);
        ref::core_forward(cp, q.data(), k.data(), v.data(), S.data(), P.data(), o.data(), lse.data());
        ref::core_backward(cp, q.data(), k.data(), v.data(), out.data(), dout.data(), P.data(), S.data(),
                           dq.data(), dk.data(), dv.data());
        if (p.sink_logits) {
          into.dsink[h] += static_cast<float>(ref::core_dsink(cp, out.data(), dout.data(), lse.data()));
          for (int64_t i = 0; i < s.q_len; ++i) {
            double D = 0;
            for (int64_t e = 0; e < d; ++e) D += out[i * d + e] * dout[i * d + e];
            if (dsink_terms && D != 0.0) (*dsink_terms)[h] += std::fabs(std::exp(cp.sink - lse[i]) * D);
          }
        }
        ref::store_rows(dst, dst.dq, b, s.q_begin, s.q_len, h, dq.data());
      }
      ref::store_rows(dst, dst.dk, b, s.k_begin, s.k_len, hk, dk.data());
      ref::store_rows(dst, dst.dv, b, s.k_begin, s.k_len, hk, dv.data());
    }
  }
}

// Forward and backward of one spec against the float64 results, as the file comment describes.
// `tweak` (optional) edits each problem after construction, e.g. its ALiBi slopes.
void check_problem(const ft::ProblemSpec& spec, void (*tweak)(ft::Problem&) = nullptr) {
  SCOPED_TRACE(spec.describe());
  if (std::getenv("FLASHLAB_TEST_VERBOSE")) std::printf("%s\n", spec.describe().c_str());
  ft::Problem flash(spec);
  ft::Problem base(spec);  // holds `exact` rounded to the dtype
  ft::ProblemSpec spec32 = spec;
  spec32.dtype = DType::kFloat32;
  ft::Problem exact(spec32);
  for (auto [from, to] : {std::pair{&flash.q, &exact.q}, {&flash.k, &exact.k}, {&flash.v, &exact.v},
                          {&flash.dout, &exact.dout}})
    copy_values(*from, *to);
  exact.sink_logits = flash.sink_logits;  // drawn from the dtype-independent seed anyway
  if (tweak != nullptr) tweak(flash), tweak(base), tweak(exact);
  const TermScales term = term_scales(exact);

  // ---- forward
  ASSERT_TRUE(run_forward(exact, Impl::kReference).ok());
  copy_values(exact.out, base.out);
  flash.poison_forward_outputs();
  const Status st = run_forward(flash, Impl::kCpuFlash);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_TRUE(within_tolerance("out", flash.out, base.out, exact.out, term.out, term.score));
  EXPECT_TRUE(lse_within_tolerance(flash.lse, exact.lse, flash, term.score));

  // ---- backward from the rounded exact output and the exact LSE
  std::vector<double> dsink_terms;
  copy_values(base.out, flash.out);
  flash.lse = exact.lse;
  if (spec.dtype == DType::kFloat32) {  // here `out` is O to fp32 precision: the API reference applies
    ASSERT_TRUE(run_backward(exact, Impl::kReference).ok());
    ft::Problem check(spec32);
    check.poison_backward_outputs();  // padding stays NaN: within_tolerance checks it
    copy_values(exact.dq, check.dq), copy_values(exact.dk, check.dk), copy_values(exact.dv, check.dv);
    const std::vector<float> ref_dsink = exact.dsink;
    fa2_exact_backward(flash, exact, &dsink_terms);
    EXPECT_TRUE(within_tolerance("dq(fa2 vs kReference)", check.dq, check.dq, exact.dq, term.dq, term.score));
    EXPECT_TRUE(within_tolerance("dk(fa2 vs kReference)", check.dk, check.dk, exact.dk, term.dk, term.score));
    for (size_t h = 0; h < ref_dsink.size(); ++h)
      EXPECT_NEAR(ref_dsink[h], exact.dsink[h], 1e-5 * (1 + dsink_terms[h])) << "dsink(fa2 vs kReference) head " << h;
  } else {
    fa2_exact_backward(flash, exact, &dsink_terms);
  }
  copy_values(exact.dq, base.dq), copy_values(exact.dk, base.dk), copy_values(exact.dv, base.dv);
  flash.poison_backward_outputs();
  const Status sb = run_backward(flash, Impl::kCpuFlash);
  ASSERT_TRUE(sb.ok()) << sb.to_string();
  EXPECT_TRUE(within_tolerance("dq", flash.dq, base.dq, exact.dq, term.dq, term.score));
  EXPECT_TRUE(within_tolerance("dk", flash.dk, base.dk, exact.dk, term.dk, term.score));
  EXPECT_TRUE(within_tolerance("dv", flash.dv, base.dv, exact.dv, term.dv, term.score));
  // dsink = −Σ_i p_sink_i D_i: fp32 terms against float64 ones, from the same rounded out and LSE.
  for (size_t h = 0; h < flash.dsink.size(); ++h)
    EXPECT_NEAR(flash.dsink[h], exact.dsink[h], 1e-4 * (1e-3 + dsink_terms[h]) + 1e-6 * std::fabs(exact.dsink[h]))
        << "dsink head " << h;
}

// =============================================================================================
// The sweep
// =============================================================================================

// A named feature applied to a random base problem.
struct Feature {
  const char* name;
  void (*apply)(ft::ProblemSpec&, std::mt19937_64&);
};

int64_t pick(std::mt19937_64& rng, std::initializer_list<int64_t> v) {
  return *(v.begin() + std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng));
}

const Feature kFeatures[] = {
    {"plain", [](ft::ProblemSpec&, std::mt19937_64&) {}},
    {"causal_bottom_right", [](ft::ProblemSpec& s, std::mt19937_64&) { s.causal = true; }},
    {"causal_top_left",
     [](ft::ProblemSpec& s, std::mt19937_64&) { s.causal = true, s.causal_align = CausalAlign::kTopLeft; }},
    {"masked_rows",  // seqlen_q > seqlen_k, bottom-right: the first rows see no key
     [](ft::ProblemSpec& s, std::mt19937_64&) { s.causal = true, s.seqlen_q = 113, s.seqlen_k = 17; }},
    {"window",
     [](ft::ProblemSpec& s, std::mt19937_64& r) {
       s.window_left = pick(r, {0, 3, 40}), s.window_right = pick(r, {0, 5, 70});
       if (pick(r, {0, 1})) s.causal_align = CausalAlign::kTopLeft;
     }},
    {"window_left_only",
     [](ft::ProblemSpec& s, std::mt19937_64& r) { s.window_left = pick(r, {0, 16, 100}), s.causal = pick(r, {0, 1}); }},
    {"window_right_only", [](ft::ProblemSpec& s, std::mt19937_64& r) { s.window_right = pick(r, {0, 9, 64}); }},
    {"softcap", [](ft::ProblemSpec& s, std::mt19937_64&) { s.softcap = 5.0f, s.input_scale = 4.0f; }},
    {"alibi", [](ft::ProblemSpec& s, std::mt19937_64&) { s.alibi = true; }},
    {"softcap_alibi_causal",
     [](ft::ProblemSpec& s, std::mt19937_64&) { s.softcap = 3.0f, s.alibi = s.causal = true, s.input_scale = 3.0f; }},
    {"dropout", [](ft::ProblemSpec& s, std::mt19937_64& r) { s.dropout_p = 0.17f, s.dropout_offset = pick(r, {0, 77}); }},
    {"dropout_causal_alibi_window",
     [](ft::ProblemSpec& s, std::mt19937_64&) { s.dropout_p = 0.3f, s.alibi = s.causal = true, s.window_left = 50; }},
    {"peaky_scores", [](ft::ProblemSpec& s, std::mt19937_64&) { s.input_scale = 6.0f, s.softmax_scale = 0.5f; }},
    {"varlen_with_empty",
     [](ft::ProblemSpec& s, std::mt19937_64& r) {
       s.lens_q = {17, 0, 1, 113, 40};
       s.lens_k = {203, 5, 0, 113, 1};
       if (pick(r, {0, 1})) std::swap(s.lens_q, s.lens_k);
       s.causal = pick(r, {0, 1});
     }},
    {"varlen_features",
     [](ft::ProblemSpec& s, std::mt19937_64&) {
       s.lens_q = {0, 65, 130, 1};
       s.lens_k = {3, 64, 129, 0};
       s.causal = true, s.causal_align = CausalAlign::kTopLeft, s.dropout_p = 0.1f, s.alibi = true, s.softcap = 8.0f;
     }},
    {"row_pad", [](ft::ProblemSpec& s, std::mt19937_64& r) { s.row_pad = pick(r, {1, 3, 16}); }},
    {"gqa_8", [](ft::ProblemSpec& s, std::mt19937_64&) { s.heads_kv = 1, s.heads_q = 8; }},
    {"odd_head_dim", [](ft::ProblemSpec& s, std::mt19937_64& r) { s.head_dim = pick(r, {1, 7, 17, 40, 72, 100}); }},
    // Attention sinks (last, so the features above keep their random draws).
    {"sinks", [](ft::ProblemSpec& s, std::mt19937_64& r) { s.sinks = true, s.causal = pick(r, {0, 1}); }},
    {"sinks_masked_rows",  // rows that see no key keep LSE = sink
     [](ft::ProblemSpec& s, std::mt19937_64& r) {
       s.sinks = s.causal = true, s.seqlen_q = 113, s.seqlen_k = 17;
       if (pick(r, {0, 1})) s.window_left = 3;
     }},
    {"sinks_top_left_window_gqa",
     [](ft::ProblemSpec& s, std::mt19937_64&) {
       s.sinks = s.causal = true, s.causal_align = CausalAlign::kTopLeft, s.window_left = 40;
       s.heads_kv = 1, s.heads_q = 8;
     }},
    {"sinks_varlen_features",
     [](ft::ProblemSpec& s, std::mt19937_64& r) {
       s.lens_q = {17, 0, 1, 113, 40};
       s.lens_k = {203, 5, 0, 113, 1};
       if (pick(r, {0, 1})) std::swap(s.lens_q, s.lens_k);
       s.sinks = s.causal = true, s.dropout_p = 0.1f, s.alibi = true, s.softcap = 8.0f;
     }},
    // StreamingLLM sink tokens left of a left window (kept when a feature drawn before set one).
    {"sink_tokens",
     [](ft::ProblemSpec& s, std::mt19937_64& r) {
       s.sink_tokens = pick(r, {1, 4, 70});
       if (s.window_left < 0) s.window_left = pick(r, {0, 16, 40});
       if (pick(r, {0, 1})) s.causal = true;
     }},
};

// A random problem: seqlens from {1, 17, 113, 203} (drawn independently, so sq != sk both ways),
// GQA ratio 1, 2 or 8, head dims of the usual buckets, batch 1..2, a fresh data seed.
ft::ProblemSpec random_base(std::mt19937_64& rng, DType dt) {
  ft::ProblemSpec s;
  s.dtype = dt;
  s.batch = pick(rng, {1, 2});
  s.seqlen_q = pick(rng, {1, 17, 113, 203});
  s.seqlen_k = pick(rng, {1, 17, 113, 203});
  s.heads_kv = pick(rng, {1, 2});
  s.heads_q = s.heads_kv * pick(rng, {1, 2, 8});
  s.head_dim = pick(rng, {32, 64, 80, 96, 128, 256});
  if (s.head_dim == 256 && s.heads_q == 16) s.heads_q = 8;  // keep the float64 reference quick
  s.data_seed = rng();
  s.dropout_seed = rng();
  return s;
}

// Two random problems per feature and dtype.
TEST(Sweep, EveryFeatureInEveryDtype) {
  std::mt19937_64 rng(20240611);
  for (const Feature& f : kFeatures) {
    for (int n = 0; n < 2; ++n) {
      for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
        ft::ProblemSpec s = random_base(rng, dt);
        f.apply(s, rng);
        SCOPED_TRACE(f.name);
        check_problem(s);
      }
    }
  }
}

// ALiBi slopes of 0 (that head has no score modification) and < 0 next to ordinary ones, with
// GQA: the backward's pass 1 shares Kᵀ across the group and must not fold the scale into it.
TEST(Sweep, AlibiSlopesOfZeroAndNegative) {
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    ft::ProblemSpec s;
    s.dtype = dt, s.seqlen_q = 113, s.seqlen_k = 203, s.heads_q = 4, s.heads_kv = 2, s.head_dim = 64;
    s.alibi = true, s.causal = dt == DType::kFloat32;
    check_problem(s, [](ft::Problem& pb) { pb.alibi_slopes[0] = 0.0f, pb.alibi_slopes[3] = -0.05f; });
  }
}

TEST(Sweep, LongSequencesAndHeadDimExtremes) {
  std::vector<ft::ProblemSpec> specs;
  ft::ProblemSpec s;
  s.batch = 1, s.heads_q = 2, s.heads_kv = 1, s.head_dim = 64, s.data_seed = 11;
  s.seqlen_q = 1023, s.seqlen_k = 1023, s.causal = true, s.dtype = DType::kBFloat16;
  specs.push_back(s);
  s.seqlen_q = 203, s.seqlen_k = 1023, s.causal = false, s.dropout_p = 0.1f, s.dtype = DType::kFloat32;
  specs.push_back(s);
  s = ft::ProblemSpec{};
  s.batch = 1, s.heads_q = 2, s.heads_kv = 2, s.seqlen_q = 17, s.seqlen_k = 113, s.dtype = DType::kFloat16;
  for (int64_t d : {1, 2, 3, 512}) {
    s.head_dim = d, s.data_seed = 100 + d, s.causal = d % 2 == 1;
    specs.push_back(s);
  }
  for (const ft::ProblemSpec& sp : specs) check_problem(sp);
}

// FLASHLAB_LONG_TESTS=1: hundreds of random feature combinations, and seqlen 1023 / 4224.
TEST(Sweep, LongRandomCombinations) {
  if (!long_tests()) GTEST_SKIP() << "set FLASHLAB_LONG_TESTS=1";
  std::mt19937_64 rng(99);
  const int n_features = static_cast<int>(sizeof(kFeatures) / sizeof(kFeatures[0]));
  for (int n = 0; n < 300; ++n) {
    ft::ProblemSpec s = random_base(rng, static_cast<DType>(pick(rng, {0, 1, 2})));
    std::string names;
    for (int k = 0; k < 3; ++k) {
      const Feature& f = kFeatures[std::uniform_int_distribution<int>(0, n_features - 1)(rng)];
      f.apply(s, rng);
      names += std::string(f.name) + " ";
    }
    if (n % 50 == 0) s.seqlen_q = pick(rng, {1023, 4224}), s.heads_q = s.heads_kv;
    SCOPED_TRACE(names);
    check_problem(s);
  }
}

// The check itself must be able to fail: a 1% error in one element is caught in every dtype.
TEST(SweepSelfCheck, ToleranceCatchesASmallBug) {
  for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    ft::ProblemSpec s;
    s.dtype = dt, s.seqlen_q = 113, s.seqlen_k = 203, s.heads_q = 2, s.heads_kv = 1, s.head_dim = 64;
    ft::Problem flash(s), base(s);
    s.dtype = DType::kFloat32;
    ft::Problem exact(s);
    for (auto [from, to] : {std::pair{&flash.q, &exact.q}, {&flash.k, &exact.k}, {&flash.v, &exact.v}})
      copy_values(*from, *to);
    ASSERT_TRUE(run_forward(exact, Impl::kReference).ok());
    copy_values(exact.out, base.out);
    ASSERT_TRUE(run_forward(flash, Impl::kCpuFlash).ok());
    const TermScales term = term_scales(exact);
    ASSERT_TRUE(within_tolerance("out", flash.out, base.out, exact.out, term.out, term.score));
    const double scale = exact.out.max_abs_value();
    flash.out.set(0, 57, 1, 13, flash.out.get(0, 57, 1, 13) + static_cast<float>(0.01 * scale));
    EXPECT_FALSE(within_tolerance("out", flash.out, base.out, exact.out, term.out, term.score))
        << flashlab::to_string(dt);
  }
}

// =============================================================================================
// StreamingLLM sink tokens (docs/design/sink-tokens.md): the key-block walk, then cpu_flash's
// forward and backward against the float64 results, as the sweep checks them.
// =============================================================================================

// Every key of [0, sinks) ∪ [jlo, jhi] is visited exactly once, in blocks of 1..kBlockK keys in
// increasing order, and no other key is; over every placement of the two ranges around the block
// edges (meeting, overlapping, apart, either empty).
TEST(SinkTokens, KeyBlocksVisitTheUnionOnce) {
  namespace flash = flashlab::detail::flash;
  constexpr int64_t kB = flash::kBlockK;
  const int64_t edges[] = {0, 1, kB - 1, kB, kB + 1, 2 * kB - 1, 2 * kB, 2 * kB + 3, 3 * kB + 5};
  int64_t cases = 0;
  for (int64_t sinks : edges)
    for (int64_t lo : edges)
      for (int64_t hi : edges) {  // hi < lo: no row's window holds a key
        SCOPED_TRACE(::testing::Message() << "sinks " << sinks << " window [" << lo << ", " << hi << "]");
        std::vector<int> seen(static_cast<size_t>(4 * kB + 8), 0);
        const flash::KeyBlocks blocks(lo, hi, sinks);
        int64_t last_end = 0;
        for (flash::KeyBlocks::Block b = blocks.first(); b.nk > 0; b = blocks.next(b)) {
          ASSERT_LE(b.nk, kB);
          ASSERT_GE(b.j0, last_end) << "blocks out of order or overlapping";
          last_end = b.j0 + b.nk;
          for (int64_t j = b.j0; j < b.j0 + b.nk; ++j) ++seen[static_cast<size_t>(j)];
        }
        for (int64_t j = 0; j < static_cast<int64_t>(seen.size()); ++j)
          ASSERT_EQ(seen[static_cast<size_t>(j)], j < sinks || (j >= lo && j <= hi) ? 1 : 0) << "key " << j;
        ++cases;
      }
  EXPECT_EQ(cases, 9 * 9 * 9);
}

// The mask shapes, each with sink_tokens 0, 1, 4 and 70 (more than the windows, and more than one
// 64-key block), in every dtype, on fresh random inputs. The windows reach the sinks for the first
// rows and not for the later ones.
TEST(SinkTokens, CpuFlashMatchesTheReference) {
  struct Shape {
    const char* name;
    void (*apply)(ft::ProblemSpec&);
  };
  const Shape shapes[] = {
      {"causal_br_window", [](ft::ProblemSpec& s) { s.causal = true, s.window_left = 40; }},
      {"causal_br_window_reaching", [](ft::ProblemSpec& s) { s.causal = true, s.window_left = 150; }},
      {"causal_tl_sq_lt_sk",
       [](ft::ProblemSpec& s) {
         s.causal = true, s.causal_align = CausalAlign::kTopLeft, s.seqlen_q = 113, s.window_left = 3;
       }},
      {"causal_br_sq_lt_sk", [](ft::ProblemSpec& s) { s.causal = true, s.seqlen_q = 17, s.window_left = 16; }},
      {"causal_tl_sq_gt_sk",  // rows past the last key: an empty window, and still the sinks
       [](ft::ProblemSpec& s) {
         s.causal = true, s.causal_align = CausalAlign::kTopLeft, s.seqlen_k = 113, s.window_left = 10;
       }},
      {"causal_br_sq_gt_sk",  // the first rows see nothing, sinks included
       [](ft::ProblemSpec& s) { s.causal = true, s.seqlen_k = 113, s.window_left = 10; }},
      {"diagonal_only", [](ft::ProblemSpec& s) { s.causal = true, s.window_left = 0; }},
      {"two_sided_window", [](ft::ProblemSpec& s) { s.window_left = 5, s.window_right = 9, s.seqlen_q = 150; }},
      {"left_window_only", [](ft::ProblemSpec& s) { s.window_left = 30, s.causal_align = CausalAlign::kTopLeft; }},
      {"no_left_window", [](ft::ProblemSpec& s) { s.causal = true; }},  // sink tokens change nothing
      {"varlen_shorter_than_sinks",
       [](ft::ProblemSpec& s) {
         s.lens_q = {17, 0, 2, 113, 40, 3};
         s.lens_k = {3, 5, 0, 130, 1, 90};
         s.causal = true, s.window_left = 8;
       }},
      {"gqa_softcap_alibi_dropout_sinks",
       [](ft::ProblemSpec& s) {
         s.heads_q = 8, s.heads_kv = 2, s.softcap = 5.0f, s.alibi = s.sinks = s.causal = true;
         s.dropout_p = 0.1f, s.window_left = 20, s.seqlen_q = 150;
       }},
  };
  std::mt19937_64 rng(20261127);
  for (const Shape& shape : shapes)
    for (int64_t sink_tokens : {0, 1, 4, 70})
      for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
        ft::ProblemSpec s;
        s.dtype = dt, s.batch = 2, s.seqlen_q = s.seqlen_k = 203, s.heads_q = 2, s.heads_kv = 1;
        s.head_dim = pick(rng, {16, 64, 72});
        s.data_seed = rng(), s.dropout_seed = rng();
        shape.apply(s);
        s.sink_tokens = sink_tokens;
        SCOPED_TRACE(shape.name);
        check_problem(s);
      }
}

// =============================================================================================
// Bitwise properties
// =============================================================================================

bool same_bits(const ft::HostTensor& a, const ft::HostTensor& b) { return a.bytes == b.bytes; }

ft::ProblemSpec property_spec() {
  ft::ProblemSpec s;
  s.dtype = DType::kBFloat16, s.batch = 2, s.seqlen_q = 203, s.seqlen_k = 150, s.heads_q = 4, s.heads_kv = 2;
  s.head_dim = 72, s.causal = true, s.dropout_p = 0.2f, s.alibi = true, s.row_pad = 5, s.sinks = true;
  s.window_left = 90, s.sink_tokens = 5;  // StreamingLLM sink tokens left of the window of the last rows
  return s;
}

TEST(Props, BackwardIsBitwiseReproducible) {
  ft::Problem pb(property_spec());
  ASSERT_TRUE(run_forward(pb, Impl::kCpuFlash).ok());
  pb.poison_backward_outputs();  // padding too: same_bits compares whole buffers
  ASSERT_TRUE(run_backward(pb, Impl::kCpuFlash).ok());
  const ft::HostTensor dq = pb.dq, dk = pb.dk, dv = pb.dv;
  const std::vector<float> dsink = pb.dsink;
  for (int run = 0; run < 3; ++run) {
    pb.poison_backward_outputs();
    ASSERT_TRUE(run_backward(pb, Impl::kCpuFlash).ok());
    EXPECT_TRUE(same_bits(pb.dq, dq) && same_bits(pb.dk, dk) && same_bits(pb.dv, dv)) << "run " << run;
    EXPECT_EQ(pb.dsink, dsink) << "run " << run;
  }
}

TEST(Props, OneThreadEqualsTwoThreads) {
  ft::ProblemSpec s = property_spec();
  for (bool varlen : {false, true}) {
    if (varlen) s.lens_q = {30, 0, 200, 64}, s.lens_k = {1, 70, 190, 64};
    ft::Problem one(s), two(s);
    ASSERT_TRUE(run_forward(one, Impl::kCpuFlash, 1).ok());
    ASSERT_TRUE(run_forward(two, Impl::kCpuFlash, 2).ok());
    EXPECT_TRUE(same_bits(one.out, two.out));
    EXPECT_EQ(one.lse, two.lse);
    ASSERT_TRUE(run_backward(one, Impl::kCpuFlash, 1).ok());
    ASSERT_TRUE(run_backward(two, Impl::kCpuFlash, 2).ok());
    EXPECT_TRUE(same_bits(one.dq, two.dq) && same_bits(one.dk, two.dk) && same_bits(one.dv, two.dv));
    EXPECT_EQ(one.dsink, two.dsink);
  }
}

// A varlen batch whose sequences are all empty: nothing to compute, but dsink (a sum over no rows)
// is still an output, 0 for every head, in both CPU backends (cpu_flash once left it unwritten: the
// GPU sweep's same-precision baseline then held its poison).
TEST(Props, EmptyVarlenBatchWritesZeroDsink) {
  ft::ProblemSpec s = property_spec();
  s.lens_q = {0}, s.lens_k = {0};
  for (Impl impl : {Impl::kCpuFlash, Impl::kReference}) {
    ft::Problem pb(s);
    ASSERT_TRUE(run_forward(pb, impl).ok());
    pb.poison_backward_outputs();
    ASSERT_TRUE(run_backward(pb, impl).ok());
    ASSERT_EQ(pb.dsink.size(), static_cast<size_t>(s.heads_q));
    for (float x : pb.dsink) EXPECT_EQ(x, 0.0f) << flashlab::to_string(impl);
  }
}

// A head-major (batch, heads, seqlen, dim) layout, with the same values, gives the same bits:
// strides only move data, they never change the arithmetic.
TEST(Props, HeadMajorStridesGiveTheSameBits) {
  ft::ProblemSpec s = property_spec();
  s.row_pad = 0;
  ft::Problem pb(s);
  ASSERT_TRUE(run_forward(pb, Impl::kCpuFlash).ok());
  ASSERT_TRUE(run_backward(pb, Impl::kCpuFlash).ok());

  // Transposed copies: element (b, r, h, d) at b * (H*S*D) + h * (S*D) + r * D + d.
  auto head_major = [&](const ft::HostTensor& t) {
    ft::HostTensor c = t;
    c.head_stride = t.rows * t.dim, c.row_stride = t.dim, c.batch_stride = t.heads * t.rows * t.dim;
    copy_values(t, c);
    return c;
  };
  ft::HostTensor q = head_major(pb.q), k = head_major(pb.k), v = head_major(pb.v), dout = head_major(pb.dout);
  ft::HostTensor out = head_major(pb.out), dq = head_major(pb.dq), dk = head_major(pb.dk), dv = head_major(pb.dv);
  out.fill_nan(), dq.fill_nan(), dk.fill_nan(), dv.fill_nan();
  std::vector<float> lse(pb.lse.size(), std::nanf(""));

  FwdParams f = pb.fwd_params(Impl::kCpuFlash);
  f.q = q.ref(), f.k = k.ref(), f.v = v.ref(), f.out = out.mut(), f.lse = lse.data();
  ASSERT_TRUE(flashlab::attention_forward(f).ok());
  BwdParams bp = pb.bwd_params(Impl::kCpuFlash);
  bp.q = q.ref(), bp.k = k.ref(), bp.v = v.ref(), bp.out = out.ref(), bp.dout = dout.ref(), bp.lse = lse.data();
  bp.dq = dq.mut(), bp.dk = dk.mut(), bp.dv = dv.mut();
  ASSERT_TRUE(flashlab::attention_backward(bp).ok());
  EXPECT_TRUE(same_bits(out, head_major(pb.out)));
  EXPECT_EQ(lse, pb.lse);
  EXPECT_TRUE(same_bits(dq, head_major(pb.dq)) && same_bits(dk, head_major(pb.dk)) && same_bits(dv, head_major(pb.dv)));
}

TEST(Props, NullLseChangesNothingElse) {
  ft::Problem pb(property_spec());
  ASSERT_TRUE(run_forward(pb, Impl::kCpuFlash).ok());
  const ft::HostTensor out = pb.out;
  pb.poison_forward_outputs();
  FwdParams p = pb.fwd_params(Impl::kCpuFlash);
  p.lse = nullptr;
  ASSERT_TRUE(flashlab::attention_forward(p).ok());
  EXPECT_TRUE(std::all_of(pb.lse.begin(), pb.lse.end(), [](float x) { return std::isnan(x); }));
  for (int64_t b = 0; b < out.batch; ++b)  // padding aside, the same bits
    for (int64_t r = 0; r < out.rows; ++r)
      for (int64_t h = 0; h < out.heads; ++h)
        for (int64_t d = 0; d < out.dim; ++d)
          ASSERT_EQ(flashlab::float_to_bits(pb.out.get(b, r, h, d)), flashlab::float_to_bits(out.get(b, r, h, d)));
}

// Extra memory is per-thread tiles (forward) plus one float per query row and head (backward's D):
// nothing grows like seqlen_q x seqlen_k.
TEST(Props, ScratchIsLinearInSeqlen) {
  ft::ProblemSpec s;
  s.dtype = DType::kFloat32, s.seqlen_q = s.seqlen_k = 2048, s.heads_q = s.heads_kv = 1, s.head_dim = 64;
  ft::Problem pb(s);
  flashlab::detail::scratch_reset_peak();
  const int64_t before = flashlab::detail::scratch_peak_bytes();
  ASSERT_TRUE(run_forward(pb, Impl::kCpuFlash, 2).ok());
  const int64_t fwd = flashlab::detail::scratch_peak_bytes() - before;
  EXPECT_GT(fwd, 0) << "scratch must be counted";
  EXPECT_LT(fwd, 2 * 256 * 1024) << "forward: per-thread tiles only";
  flashlab::detail::scratch_reset_peak();
  ASSERT_TRUE(run_backward(pb, Impl::kCpuFlash, 2).ok());
  const int64_t bwd = flashlab::detail::scratch_peak_bytes() - before;
  EXPECT_LT(bwd, 2 * 256 * 1024 + 2048 * 4 + 64) << "backward: tiles + D";
}

}  // namespace
