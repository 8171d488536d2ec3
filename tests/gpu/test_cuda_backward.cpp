// tests/gpu/test_cuda_backward.cpp — the production CUDA implementations' backward against the
// float64 reference. The GPU tests (Sweep, Determinism, Workspace) run once for every production
// CUDA implementation this build compiled (production_cuda_impls(): cuda_sm80, later cuda_sm90),
// as Impls/CudaBackwardImpl.<test>/<impl>; the others are about cuda_sm80 or need no GPU.
//
//   Sweep            a randomized sweep (FLASHLAB_SM80_BWD_SWEEP configurations, default 1000, drawn;
//                    with FLASHLAB_SM80_BWD_SWEEP_RUN=1, run by the implementation; seed
//                    FLASHLAB_SM80_BWD_SEED) over dtype, head dims (buckets and multiples of 8
//                    between), seqlens 1..4224 with seqlen_q != seqlen_k both ways, GQA 1/2/8 and
//                    MQA, causal in both alignments, windows, softcap, ALiBi, dropout, varlen with
//                    empty and length-1 sequences, padded strides, peaky inputs, zero and negative
//                    softmax scales, deterministic on and off. Configurations whose bucket or dtype
//                    this build did not compile are skipped and counted.
//   VarlenNeighbourNonFinite  NaN / Inf in one packed sequence's q, k, v, dout leave its
//                    neighbours' dq, dk, dv exact (boundary blocks reach into the next sequence).
//   Determinism      deterministic = true (GQA, dropout, causal): the same call three times, the
//                    second on another stream, gives identical bytes of dq, dk, dv. cuda_sm90
//                    (no dropout) runs it on more shapes (determinism_specs): causal GQA, full
//                    MHA with 8 key blocks per head (every dq_accum tile ordered over 8 CTAs),
//                    a window, softcap, head dim 64 (one dQ slab for both warpgroups), head dim
//                    256 (two halves per slab: write_dq_wide), head dim 160 (bucket 192 on the
//                    D 256 layout), head dim 32, a packed (varlen) batch at head dims 128 and 256.
//   Workspace        too small or null: an error naming the required size, and nothing written;
//                    for cuda_sm80 also the size itself (its workspace layout).
//   Sm80Errors       cuda_sm80's unsupported combinations name the rule (no GPU needed).
//   CheckerSelfTest  the tolerance accepts a correct fp32 implementation (cpu_flash) and rejects a
//                    1 % error and a NaN (no GPU needed: a test that cannot fail is a defect).
//   ToleranceCoversKernelNumerics  ... and accepts the kernel's own rounding, emulated on the CPU.
//   SweepHarnessOnCpu  the sweep's random cases with cpu_flash in the GPU's place (no GPU needed).
// FLASHLAB_SM80_MAX_SEQLEN caps the sweep's lengths (sanitizer runs are tens of times slower).
// Without a CUDA device every GPU test is skipped (GTEST_SKIP) and the binary exits 0, so CI, which
// has no GPU, compiles and runs it. Under compute-sanitizer use a small sweep of short sequences:
//   FLASHLAB_SM80_BWD_SWEEP=40 FLASHLAB_SM80_MAX_SEQLEN=300 compute-sanitizer --tool memcheck
//     build/tests/gpu/test_cuda_backward --gtest_filter='*Sweep*:*Determinism*:*Workspace*'
// (and --tool racecheck, --tool synccheck the same way).
//
// Inputs. q, k, v, dout are drawn and rounded to the dtype once. out and lse come from the float64
// reference forward (impl kReference), out rounded to the dtype and lse in fp32: exactly what a
// caller hands the backward after a correct forward, and independent of the implementation's own
// forward.
//
// Tolerance (STYLE.md rule 10), per gradient g in {dq, dk, dv}:
//   exact  the reference backward (float64) on an fp32 copy of the rounded inputs;
//   base   exact rounded to the dtype: the error of an implementation that stored perfect results;
//   same   cpu_flash (fp32 compute, dtype outputs) given the same dtype out and lse: a
//          same-precision implementation;
//   gpu    the implementation on the dtype tensors;
//   max|gpu - exact| <= 2 max(max|base - exact|, max|same - exact|) + 2u · unit
//   rel_l2(gpu)      <= 2 max(rel_l2(base), rel_l2(same)) + u
// with u the dtype's unit roundoff (bf16 2^-8, fp16 2^-11) and unit = max|exact|.
// Why `same`: D = rowsum(dO ∘ O) can only be computed from the dtype-rounded O the forward
// returned, and dS = P ∘ (dP − D) cancels; where it cancels completely (a row that sees one key:
// exact dQ = dK = 0) the rounding of O is all that is left, for every implementation. `base`
// cannot show that error; a same-precision implementation does.
// Why more slack than the forward test's (u · unit and u / 4): like FlashAttention-2, the kernel
// rounds P (for dV = Pᵀ·dO) and dS (for dK = dSᵀ·Q and dQ = dS·K) to the dtype before the
// products, and dS is a difference: its rounding error is relative to P·|dP| rather than to dS,
// and every element of dQ, dK is a sum of seqlen such rounded terms (fp16 adds the subnormal range
// for the small dS of long rows). ToleranceCoversKernelNumerics emulates exactly that on the CPU —
// fp32 products, P and dS rounded, D from the rounded O — and checks it against the tolerance
// *without* the `same` term: it uses 0.33 to 0.64 of it over bf16/fp16, long rows and peaky
// inputs (printed), i.e. at least 1.5x headroom, mostly 2x; the self-tests show one element off by
// 8u of the gradient's scale still fails, with and without the `same` term.
// Outputs and the workspace are poisoned (0xFF bytes: NaN) before each run: NaN never passes, the
// padding between rows must still hold the poison afterwards, and the kernels may not rely on a
// zeroed workspace.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "api/backend.h"
#include "cuda/common/kernel_args.h"  // head_dim_bucket
#include "cuda_test_util.h"
#include "flashlab/flashlab.h"
#include "testing/problem.h"

#if defined(FLASHLAB_WITH_CUDA)
#include <cuda_runtime.h>

#include "testing/device_problem.h"
#endif

namespace {

using flashlab::AttentionConfig;
using flashlab::BwdParams;
using flashlab::CausalAlign;
using flashlab::Device;
using flashlab::DType;
using flashlab::FwdParams;
using flashlab::Impl;
using flashlab::Status;
using flashlab::StatusCode;
using flashlab::testing::HostTensor;
using flashlab::testing::Problem;
using flashlab::testing::ProblemSpec;
using namespace flashlab::cuda_test;  // NOLINT: the shared helpers of cuda_test_util.h

// ---- The checker (host only) -------------------------------------------------------------------

// How much of the allowed error a result uses: max of (error / tolerance) over both criteria
// (> 1 fails). Appends what failed to `why`. `same` (may be null): a same-precision
// implementation's result (see the file comment); the baseline error is the larger of its error
// and that of exact rounded to the dtype.
double check_one(const char* name, const HostTensor& got, const HostTensor& exact, const HostTensor* same,
                 DType dtype, std::string* why, double floor = 0.0) {
  const double u = unit_roundoff(dtype);
  const Errors base = measure(got, exact, true, dtype);
  const Errors e = measure(got, exact, false, dtype);
  if (e.nonfinite > 0) {
    *why += std::string(" ") + name + " has " + std::to_string(e.nonfinite) + " non-finite values;";
    return INFINITY;
  }
  double base_max = base.max_abs, base_rel = base.rel_l2();
  if (same != nullptr) {
    const Errors s = measure(*same, exact, false, dtype);
    if (s.nonfinite == 0) {
      base_max = std::max(base_max, s.max_abs);
      base_rel = std::max(base_rel, s.rel_l2());
    }
  }
  const double max_tol = 2 * base_max + 2 * u * base.ref_max + floor;
  const double rel_tol = 2 * base_rel + u;
  double used = max_tol > 0 ? e.max_abs / max_tol : (e.max_abs > 0 ? INFINITY : 0.0);
  if (!(e.max_abs <= max_tol))
    *why += std::string(" ") + name + " max_abs " + std::to_string(e.max_abs) + " > " +
            std::to_string(max_tol) + ";";
  // rel_l2 means nothing when every error is within the fp32 cancellation floor (exact ~0).
  if (base.ref_sq > 0 && !(e.max_abs <= floor)) {
    used = std::max(used, e.rel_l2() / rel_tol);
    if (!(e.rel_l2() <= rel_tol))
      *why += std::string(" ") + name + " rel_l2 " + std::to_string(e.rel_l2()) + " > " +
              std::to_string(rel_tol) + ";";
  }
  return used;
}

// dsink_h = −Σ_rows e^(sink_h − LSE)·D: a sum over every query row of the head, so its error scales
// with the sum of the terms' magnitudes, Σ_rows e^(sink_h − LSE)·|D| (from got's own out, dout and
// LSE, which are the reference forward's, rounded), not with |dsink_h| (the terms cancel). fp32
// terms summed in any order: 64 u32 of that sum, plus twice the same-precision baseline's error.
double check_dsink(const Problem& got, const Problem& exact, const Problem* same, std::string* why) {
  const int64_t heads = static_cast<int64_t>(got.dsink.size());
  std::vector<double> scale(static_cast<size_t>(heads), 0.0);
  for (int64_t b = 0; b < got.out.batch; ++b)
    for (int64_t r = 0; r < got.out.rows; ++r)
      for (int64_t h = 0; h < heads; ++h) {
        double d = 0;
        for (int64_t e = 0; e < got.out.dim; ++e) d += double(got.dout.get(b, r, h, e)) * got.out.get(b, r, h, e);
        const double lse = got.lse[b * got.lse_batch_stride + h * got.lse_head_stride + r];
        scale[h] += std::exp(double(got.sink_logits[h]) - lse) * std::fabs(d);
      }
  double used = 0;
  for (int64_t h = 0; h < heads; ++h) {
    const double err = std::fabs(double(got.dsink[h]) - exact.dsink[h]);
    const double base = same ? std::fabs(double(same->dsink[h]) - exact.dsink[h]) : 0.0;
    const double tol = 2 * base + 64 * std::ldexp(1.0, -24) * scale[h] + 1e-30;
    if (!(err <= tol)) {
      *why += " dsink[" + std::to_string(h) + "] " + std::to_string(got.dsink[h]) + " vs exact " +
              std::to_string(exact.dsink[h]) + " (tolerance " + std::to_string(tol) + ");";
      return INFINITY;
    }
    used = std::max(used, err / tol);
  }
  return used;
}

// Empty string when dq, dk, dv of `got` pass against `exact`, else what failed. *used: the
// largest fraction of a tolerance used. `same`: a same-precision implementation's gradients.
std::string check_backward(const Problem& got, const Problem& exact, DType dtype, double* used = nullptr,
                           const Problem* same = nullptr, const double* floors = nullptr) {
  std::string why;
  double u = 0;
  u = std::max(
      u, check_one("dq", got.dq, exact.dq, same ? &same->dq : nullptr, dtype, &why, floors ? floors[0] : 0));
  u = std::max(
      u, check_one("dk", got.dk, exact.dk, same ? &same->dk : nullptr, dtype, &why, floors ? floors[1] : 0));
  u = std::max(u, check_one("dv", got.dv, exact.dv, same ? &same->dv : nullptr, dtype, &why));
  if (!got.dsink.empty()) u = std::max(u, check_dsink(got, exact, same, &why));
  if (used) *used = u;
  return why;
}

// Absolute floors for dq and dk: fp32 rounding of the cancellation in dS = P ∘ (dP − D). Found on
// the H100: where the exact gradient is ~0 (a row that sees one key: dP = dO·V_0 = D exactly), the
// kernel's dP (MMA order) and D (preprocess order) differ by a few fp32 ulps of |dO|·|V|·√d, and
// that difference reaches dQ = scale·dS·K as ~1e-6 while max|exact| (the relative scale) is ~0 and
// cpu_flash happens to cancel exactly. The error of one dS_ij is ≲ P_ij·u32·√d·max|dO|·max|V|·keep
// (keep = 1/(1−p) with dropout); dQ_i sums P_ij ≤ 1 of them, dK_j up to seqlen_q (√ of it, random
// signs). 8× that is the floor: 1e-5 or less at these shapes, far below the dtype's u · unit
// wherever the gradient is not ~0, so it cannot hide a real error there.
void cancellation_floors(const Problem& pb, float scale, double floors[2]) {
  const double u32 = std::ldexp(1.0, -24);
  const double d = static_cast<double>(pb.spec.head_dim);
  const double s = std::isnan(scale) ? 1.0 / std::sqrt(d) : std::fabs(double(scale));
  const double keep = pb.spec.dropout_p > 0 ? 1.0 / (1.0 - pb.spec.dropout_p) : 1.0;
  int64_t rows = pb.spec.seqlen_q;
  for (int32_t l : pb.spec.lens_q) rows = std::max<int64_t>(rows, l);
  const double eps = 8 * u32 * std::sqrt(d) * pb.dout.max_abs_value() * pb.v.max_abs_value() * keep * s;
  floors[0] = eps * pb.k.max_abs_value();
  floors[1] = eps * pb.q.max_abs_value() * std::sqrt(double(std::max<int64_t>(rows, 1)));
}

// The same-precision baseline: cpu_flash (fp32 compute, dtype outputs) on the same inputs,
// including the same dtype-rounded out and lse.
Problem same_precision_backward(const Problem& pb, float softmax_scale) {
  Problem sp = pb;
  sp.poison_backward_outputs();
  BwdParams p = sp.bwd_params(Impl::kCpuFlash);
  p.softmax_scale = softmax_scale;
  const Status st = flashlab::attention_backward(p);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return sp;
}

// The forward the backward is handed: the reference's out (rounded to the dtype) and lse.
void reference_forward_into(Problem& pb, float softmax_scale) {
  FwdParams p = pb.fwd_params(Impl::kReference);
  p.softmax_scale = softmax_scale;
  const Status st = flashlab::attention_forward(p);
  EXPECT_TRUE(st.ok()) << st.to_string();
}

// The exact gradients: the reference backward on an fp32 copy of the (already rounded) inputs.
Problem exact_backward(const Problem& pb, float softmax_scale) {
  ProblemSpec s = pb.spec;
  s.dtype = DType::kFloat32;
  if (pb.varlen()) s.batch = 1;  // Problem recomputes batch from lens
  Problem ex(s);
  ex.sink_logits = pb.sink_logits;
  HostTensor* dst[4] = {&ex.q, &ex.k, &ex.v, &ex.dout};
  const HostTensor* src[4] = {&pb.q, &pb.k, &pb.v, &pb.dout};
  for (int t = 0; t < 4; ++t)
    for (int64_t b = 0; b < src[t]->batch; ++b)
      for (int64_t r = 0; r < src[t]->rows; ++r)
        for (int64_t h = 0; h < src[t]->heads; ++h)
          for (int64_t d = 0; d < src[t]->dim; ++d) dst[t]->set(b, r, h, d, src[t]->get(b, r, h, d));
  BwdParams p = ex.bwd_params(Impl::kReference);
  p.softmax_scale = softmax_scale;
  const Status st = flashlab::attention_backward(p);  // ignores out and lse: recomputes them
  EXPECT_TRUE(st.ok()) << st.to_string();
  return ex;
}

// ---- Checker self-tests (run everywhere) -------------------------------------------------------

// The kernel's numerics on the CPU, for fixed-length causal/full problems without score
// modifications or dropout: fp32 scores, P from the fp32 LSE, dP in fp32, D = rowsum(dO ∘ O) from
// the dtype-rounded O, and P and dS rounded to the dtype before the products that consume them.
void emulate_kernel_numerics(Problem& pb) {
  const ProblemSpec& s = pb.spec;
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const int64_t shift = s.causal_align == CausalAlign::kBottomRight ? s.seqlen_k - s.seqlen_q : 0;
  const int64_t group = s.heads_q / s.heads_kv, D = s.head_dim;
  std::vector<double> dk(static_cast<size_t>(s.seqlen_k * D)), dv(dk.size()), dq(static_cast<size_t>(D));
  std::vector<float> p(static_cast<size_t>(s.seqlen_k)), ds(p.size());
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t hk = 0; hk < s.heads_kv; ++hk) {
      std::fill(dk.begin(), dk.end(), 0.0);
      std::fill(dv.begin(), dv.end(), 0.0);
      for (int64_t h = hk * group; h < (hk + 1) * group; ++h)
        for (int64_t i = 0; i < s.seqlen_q; ++i) {
          const float lse = pb.lse[b * pb.lse_batch_stride + h * pb.lse_head_stride + i];
          float dsum = 0;
          for (int64_t d = 0; d < D; ++d) dsum += pb.dout.get(b, i, h, d) * pb.out.get(b, i, h, d);
          for (int64_t j = 0; j < s.seqlen_k; ++j) {
            float acc = 0, dp = 0;
            for (int64_t d = 0; d < D; ++d) {
              acc += pb.q.get(b, i, h, d) * pb.k.get(b, j, hk, d);
              dp += pb.dout.get(b, i, h, d) * pb.v.get(b, j, hk, d);
            }
            const bool masked = s.causal && j > i + shift;
            const float prob = masked || std::isinf(lse) ? 0.0f : std::exp(acc * scale - lse);
            p[j] = flashlab::round_to(s.dtype, prob);
            ds[j] = flashlab::round_to(s.dtype, prob * (dp - dsum));
          }
          std::fill(dq.begin(), dq.end(), 0.0);
          for (int64_t j = 0; j < s.seqlen_k; ++j)
            for (int64_t d = 0; d < D; ++d) {
              dq[d] += ds[j] * pb.k.get(b, j, hk, d);
              dk[j * D + d] += ds[j] * pb.q.get(b, i, h, d);
              dv[j * D + d] += p[j] * pb.dout.get(b, i, h, d);
            }
          for (int64_t d = 0; d < D; ++d) pb.dq.set(b, i, h, d, static_cast<float>(dq[d] * scale));
        }
      for (int64_t j = 0; j < s.seqlen_k; ++j)
        for (int64_t d = 0; d < D; ++d) {
          pb.dk.set(b, j, hk, d, static_cast<float>(dk[j * D + d] * scale));
          pb.dv.set(b, j, hk, d, static_cast<float>(dv[j * D + d]));
        }
    }
}

TEST(CudaBackward, ToleranceCoversKernelNumerics) {
  struct Shape {
    int64_t sq, sk, hq, hkv, d;
  };
  const Shape shapes[] = {{64, 203, 4, 2, 64}, {1023, 1023, 1, 1, 64}, {17, 1023, 2, 1, 128}};
  for (DType dt : {DType::kBFloat16, DType::kFloat16})
    for (const Shape& sh : shapes)
      for (float input_scale : {1.0f, 4.0f})
        for (bool causal : {false, true}) {
          ProblemSpec s;
          s.batch = 1;
          s.seqlen_q = sh.sq;
          s.seqlen_k = sh.sk;
          s.heads_q = sh.hq;
          s.heads_kv = sh.hkv;
          s.head_dim = sh.d;
          s.dtype = dt;
          s.causal = causal;
          s.input_scale = input_scale;
          s.data_seed = 11 + static_cast<uint64_t>(input_scale * 10) + static_cast<uint64_t>(sh.sq);
          Problem pb(s);
          reference_forward_into(pb, NAN);
          const Problem exact = exact_backward(pb, NAN);
          pb.poison_backward_outputs();
          emulate_kernel_numerics(pb);
          double used = 0;
          const std::string why = check_backward(pb, exact, dt, &used);
          EXPECT_EQ(why, "") << s.describe() << " input_scale " << input_scale;
          std::printf("[ emulated ] %-40s input_scale %.0f: uses %.2f of the tolerance\n",
                      s.describe().c_str(), input_scale, used);
        }
}

TEST(CudaBackward, CheckerSelfTest) {
  for (DType dt : {DType::kBFloat16, DType::kFloat16}) {
    const ProblemSpec s = checker_self_test_spec(dt);
    Problem pb(s);
    reference_forward_into(pb, NAN);
    const Problem exact = exact_backward(pb, NAN);
    // A correct implementation with fp32 compute and dtype outputs passes.
    pb.poison_backward_outputs();
    ASSERT_TRUE(flashlab::attention_backward(pb.bwd_params(Impl::kCpuFlash)).ok());
    EXPECT_EQ(check_backward(pb, exact, dt), "") << flashlab::to_string(dt);
    // One element of each gradient off by 8 units of roundoff of its scale (bf16 3 %, fp16 0.4 %)
    // fails; so does one NaN.
    HostTensor* grads[3] = {&pb.dq, &pb.dk, &pb.dv};
    const HostTensor* exacts[3] = {&exact.dq, &exact.dk, &exact.dv};
    for (int g = 0; g < 3; ++g) {
      const HostTensor saved = *grads[g];
      const Errors e = measure(*grads[g], *exacts[g], false, dt);
      grads[g]->set(1, 50, 1, 7,
                    grads[g]->get(1, 50, 1, 7) + static_cast<float>(8 * unit_roundoff(dt) * e.ref_max));
      EXPECT_NE(check_backward(pb, exact, dt), "") << "gradient " << g;
      *grads[g] = saved;
      grads[g]->set(0, 0, 0, 0, NAN);
      EXPECT_NE(check_backward(pb, exact, dt), "") << "gradient " << g;
      *grads[g] = saved;
    }
  }
}

struct SweepCase {
  ProblemSpec spec;
  float scale = NAN;  // NaN: the default 1/sqrt(head_dim)
  bool deterministic = false;
};

// max_seqlen caps every length (sanitizer runs, the CPU harness test).
SweepCase random_case(std::mt19937_64& rng, int64_t max_seqlen) {
  auto pick = [&](std::initializer_list<int64_t> v) { return draw_pick(rng, v); };
  auto chance = [&](double p) { return draw_chance(rng, p); };
  SweepCase c;
  ProblemSpec& s = c.spec;
  s.dtype = chance(0.5) ? DType::kBFloat16 : DType::kFloat16;
  s.head_dim = chance(0.6) ? pick({32, 64, 96, 128, 192, 256})
                           : 8 * std::uniform_int_distribution<int64_t>(1, 32)(rng);
  s.seqlen_q = pick({1, 17, 64, 113, 128, 203, 256, 1023});
  s.seqlen_k = chance(0.4) ? s.seqlen_q : pick({1, 17, 64, 113, 128, 203, 256, 1023});
  if (chance(0.006)) {  // long sequences: one head of a small bucket keeps the reference affordable
    s.seqlen_q = chance(0.5) ? 4224 : pick({17, 203});
    s.seqlen_k = 4224;
    s.head_dim = std::min<int64_t>(s.head_dim, 64);
  }
  s.heads_kv = s.seqlen_k == 4224 ? 1 : pick({1, 2, 3});
  s.heads_q = s.heads_kv * pick({1, 1, 2, 8});
  draw_features(rng, s, &c.scale);
  c.deterministic = chance(0.3);
  s.data_seed = rng();
  // The float64 reference makes 5 products: <= ~1e8 multiply-adds each.
  cap_and_fit(s, max_seqlen, 100'000'000);
  return c;
}

// The sweep's harness (random cases, the forward it hands over, the exact gradients, the checker)
// with cpu_flash standing in for the GPU: every feature path of the sweep runs in CI too, and a
// correct fp32 implementation must pass the tolerance on all of them.
TEST(CudaBackward, SweepHarnessOnCpu) {
  std::mt19937_64 rng(99);
  int sensitive = 0;
  const int n = env_int("FLASHLAB_SM80_BWD_HARNESS", 40);
  for (int i = 0; i < n; ++i) {
    const SweepCase c = random_case(rng, 203);
    Problem pb(c.spec);
    const std::string what = "case " + std::to_string(i) + ": " + pb.spec.describe() +
                             (std::isnan(c.scale) ? "" : " scale " + std::to_string(c.scale));
    reference_forward_into(pb, c.scale);
    pb.poison_backward_outputs();
    BwdParams p = pb.bwd_params(Impl::kCpuFlash);
    p.softmax_scale = c.scale;
    p.deterministic = c.deterministic;
    const Status st = flashlab::attention_backward(p);
    ASSERT_TRUE(st.ok()) << what << ": " << st.to_string();
    const Problem exact = exact_backward(pb, c.scale);
    const Problem same = same_precision_backward(pb, c.scale);
    EXPECT_EQ(check_backward(pb, exact, pb.spec.dtype, nullptr, &same), "") << what;
    // With the same-precision term in the tolerance, one element off by 8u of dv's scale still
    // fails (dv has no cancellation: its exact values are the scale of its errors).
    const Errors e = measure(pb.dv, exact.dv, false, pb.spec.dtype);
    if (e.ref_max > 0.1) {
      HostTensor& dv = pb.dv;
      dv.set(0, 0, 0, 0,
             dv.get(0, 0, 0, 0) + static_cast<float>(8 * unit_roundoff(pb.spec.dtype) * e.ref_max));
      EXPECT_NE(check_backward(pb, exact, pb.spec.dtype, nullptr, &same), "") << what;
      ++sensitive;
    }
  }
  EXPECT_GT(sensitive, n / 2);
}

// ---- cuda_sm80's errors (no GPU needed: the rules come before any device query) ----------------

void expect_unsupported(const AttentionConfig& c, const std::string& part) {
  const Status st = flashlab::detail::sm80_supports(c, /*backward=*/true);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.to_string();
  EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
}

TEST(CudaBackward, Sm80Errors) {
  AttentionConfig c = sm80_config();
  c.dtype = DType::kFloat32;
  expect_unsupported(c, "dtype fp32 is not supported by impl cuda_sm80: supported bf16, fp16");
  c = sm80_config();
  c.head_dim = 260;
  expect_unsupported(c, "head_dim (260) is not supported by impl cuda_sm80: supported multiples of 8");
  c.head_dim = 36;
  expect_unsupported(c, "head_dim (36) is not supported by impl cuda_sm80");
  c = sm80_config();
  c.seqlen_q = (int64_t(1) << 30) + 1;
  expect_unsupported(c, "seqlen_q");
  c = sm80_config();
  c.batch = 70000;
  expect_unsupported(c, "batch (70000) is not supported by impl cuda_sm80: supported <= 65535");
  c = sm80_config();
  c.device = Device::kCPU;
  expect_unsupported(c, "runs on cuda");
}

// ---- GPU tests -----------------------------------------------------------------------------------

#if defined(FLASHLAB_WITH_CUDA)

using flashlab::testing::DeviceBuffer;
using flashlab::testing::DeviceProblem;

#define SKIP_WITHOUT_GPU() \
  if (!have_gpu())         \
  GTEST_SKIP() << "no CUDA device: " << flashlab::to_string(GetParam()) << " backward not exercised"

// The GPU tests, once per production CUDA implementation built (the parameter).
class CudaBackwardImpl : public ::testing::TestWithParam<Impl> {};

// `impl`'s backward params on the problem mirrored in `dev` (same strides, padding included). out
// and lse there must already hold the forward's results (reference_forward_into before
// DeviceProblem::init, which uploads them).
BwdParams backward_params(const DeviceProblem& dev, Impl impl, float softmax_scale, bool deterministic,
                          void* stream) {
  BwdParams p = dev.bwd_params(impl, stream);
  p.softmax_scale = softmax_scale;
  p.deterministic = deterministic;
  return p;
}

// Poisons the outputs and a workspace of the size backward_workspace_size() asks for, runs,
// copies the gradients back into the host problem's dq / dk / dv.
Status run_backward(DeviceProblem& dev, Impl impl, float softmax_scale, bool deterministic,
                    void* stream = nullptr) {
  BwdParams p = backward_params(dev, impl, softmax_scale, deterministic, stream);
  int64_t ws_bytes = -1;
  const Status ws = flashlab::backward_workspace_size(p, &ws_bytes);
  if (!ws.ok()) return ws;
  DeviceBuffer workspace;
  FLASHLAB_RETURN_IF_ERROR(workspace.allocate(static_cast<size_t>(ws_bytes), "workspace"));
  FLASHLAB_RETURN_IF_ERROR(workspace.poison());
  p.workspace = workspace.get();
  p.workspace_bytes = ws_bytes;
  FLASHLAB_RETURN_IF_ERROR(dev.poison_backward_outputs());
  const Status st = flashlab::attention_backward(p);
  if (!st.ok()) return st;
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) return Status(StatusCode::kDeviceError, cudaGetErrorString(e));
  FLASHLAB_RETURN_IF_ERROR(dev.download_backward_outputs());
  return st;
}

bool all_poison(const HostTensor& t) {
  return std::all_of(t.bytes.begin(), t.bytes.end(), [](unsigned char c) { return c == 0xff; });
}

TEST_P(CudaBackwardImpl, Sweep) {
  SKIP_WITHOUT_GPU();
  const int n = env_int("FLASHLAB_SM80_BWD_SWEEP", 1000);
  std::mt19937_64 rng(static_cast<uint64_t>(env_int("FLASHLAB_SM80_BWD_SEED", 2025)));
  // FLASHLAB_SM80_BWD_SWEEP_RUN=1: n counts the configurations the implementation runs; the cases
  // it leaves to another implementation (or that are not built) are drawn on top, up to 20 n draws.
  const bool count_run = env_int("FLASHLAB_SM80_BWD_SWEEP_RUN", 0) != 0;
  // FLASHLAB_SM80_BWD_BUCKET=D: only the cases of head-dim bucket D (e.g. a sanitizer run aimed at
  // one tile shape); the others are drawn and dropped before any work.
  const int only_bucket = env_int("FLASHLAB_SM80_BWD_BUCKET", 0);
  auto bucket_of = [](int64_t d) { return flashlab::common::head_dim_bucket(static_cast<int>(d)); };
  std::map<int, int> ran_by_bucket;
  int ran = 0, skipped = 0, routed = 0, failed = 0, with_sinks = 0, with_sink_tokens = 0;
  double worst = 0;
  for (int i = 0; count_run ? (ran < n && i < 20 * n) : i < n; ++i) {
    const SweepCase c = random_case(rng, env_int("FLASHLAB_SM80_MAX_SEQLEN", 1 << 30));
    if (only_bucket != 0 && bucket_of(c.spec.head_dim) != only_bucket) continue;
    Problem pb(c.spec);
    const std::string what = "case " + std::to_string(i) + ": " + pb.spec.describe() +
                             (std::isnan(c.scale) ? "" : " scale " + std::to_string(c.scale)) +
                             (c.deterministic ? " deterministic" : "");
    {
      // Whether the implementation takes the call, asked before the (costly) reference forward.
      DeviceProblem probe;
      const Status up = probe.init(&pb);
      ASSERT_TRUE(up.ok()) << up.to_string();
      const Status st = flashlab::validate_backward(backward_params(probe, GetParam(), c.scale, c.deterministic,
                                                                    nullptr));
      if (not_built(st)) {
        ++skipped;
        continue;
      }
      if (routed_elsewhere(st)) {  // a feature this implementation leaves to cuda_sm80 (auto picks it)
        ++routed;
        continue;
      }
    }
    reference_forward_into(pb, c.scale);
    DeviceProblem dev;
    const Status up = dev.init(&pb);
    ASSERT_TRUE(up.ok()) << up.to_string();
    const Status st = run_backward(dev, GetParam(), c.scale, c.deterministic);
    ASSERT_TRUE(st.ok()) << what << ": " << st.to_string();
    ++ran;
    ++ran_by_bucket[bucket_of(pb.spec.head_dim)];
    with_sinks += pb.spec.sinks ? 1 : 0;
    with_sink_tokens += pb.spec.sink_tokens > 0 ? 1 : 0;
    const Problem exact = exact_backward(pb, c.scale);
    const Problem same = same_precision_backward(pb, c.scale);
    double used = 0, floors[2];
    cancellation_floors(pb, c.scale, floors);
    const std::string why = check_backward(pb, exact, pb.spec.dtype, &used, &same, floors);
    worst = std::max(worst, used);
    const int64_t pad = written_padding(pb.dq) + written_padding(pb.dk) + written_padding(pb.dv);
    if (!why.empty() || pad != 0) {
      ++failed;
      ADD_FAILURE() << what << ":" << why
                    << (pad ? " wrote " + std::to_string(pad) + " padding elements" : "");
      if (failed >= 20) break;  // enough to diagnose
    }
  }
  std::printf(
      "[ sweep    ] %s: %d configurations run (%d with sinks, %d with sink tokens), %d skipped (not built), "
      "%d left to another impl, "
      "%d failed; "
      "worst uses %.2f of the tolerance\n",
      flashlab::to_string(GetParam()), ran, with_sinks, with_sink_tokens, skipped, routed, failed, worst);
  std::string buckets;
  for (const auto& [bucket, count] : ran_by_bucket) buckets += " " + std::to_string(bucket) + ":" + std::to_string(count);
  std::printf("[ sweep    ] %s: run per head-dim bucket:%s\n", flashlab::to_string(GetParam()), buckets.c_str());
  EXPECT_GT(ran, 0) << "every configuration was skipped: build with FLASHLAB_HEAD_DIMS / FLASHLAB_DTYPES";
}

ProblemSpec determinism_spec() {
  ProblemSpec s;
  s.batch = 2;
  s.seqlen_q = 300;
  s.seqlen_k = 515;
  s.heads_q = 8;
  s.heads_kv = 2;
  s.head_dim = 128;
  s.causal = true;
  s.dropout_p = 0.2f;
  return s;
}

// The shapes Determinism runs per implementation. cuda_sm80: determinism_spec() (with dropout).
// cuda_sm90 leaves dropout to cuda_sm80, so it gets the same shape without dropout, plus shapes
// whose dq_accum tiles have many ordered adders (sm90's semaphores, flash_bwd_kernel.h), and a
// packed (varlen) batch.
std::vector<ProblemSpec> determinism_specs(Impl impl) {
  if (impl != Impl::kCudaSm90) return {determinism_spec()};
  std::vector<ProblemSpec> specs;
  ProblemSpec s = determinism_spec();
  s.dropout_p = 0.0f;
  specs.push_back(s);  // causal (bottom-right), GQA 8 / 2: kPartial dK, dV
  ProblemSpec full;
  full.batch = 2;
  full.seqlen_q = 1000;
  full.seqlen_k = 1023;
  full.heads_q = 3;
  full.heads_kv = 3;
  full.head_dim = 128;
  specs.push_back(full);  // no mask: every tile gets 8 key blocks' adds
  ProblemSpec window = full;
  window.heads_kv = 1;  // MQA
  window.causal_align = CausalAlign::kTopLeft;
  window.window_left = 200;
  window.window_right = 50;
  window.softcap = 30.0f;  // the kGeneral deterministic kernel
  specs.push_back(window);
  ProblemSpec d64 = full;
  d64.head_dim = 64;  // dQ per warpgroup into one slab: warpgroup 0 then 1
  d64.causal = true;
  specs.push_back(d64);
  ProblemSpec packed = s;  // varlen (the kVarlen deterministic kernel): uneven sequences, GQA, causal
  packed.lens_q = {300, 1, 517, 128};
  packed.lens_k = {515, 17, 600, 128};
  packed.seqlen_q = 517;
  packed.seqlen_k = 600;
  specs.push_back(packed);
  ProblemSpec d256 = full;  // head dim 256: each warpgroup's slab added in two halves, in turn
  d256.head_dim = 256;
  d256.heads_kv = 1;  // MQA: kPartial dK, dV over the halves of the head dim
  specs.push_back(d256);
  ProblemSpec d256_window = window;  // the kGeneral kernel at head dim 256
  d256_window.head_dim = 256;
  specs.push_back(d256_window);
  ProblemSpec packed256 = packed;
  packed256.head_dim = 256;
  specs.push_back(packed256);
  ProblemSpec d32 = full;
  d32.head_dim = 32;
  d32.causal = true;
  specs.push_back(d32);
  ProblemSpec d160 = d256;  // bucket 192 on the D 256 layout: a 192-column dq_accum tile
  d160.head_dim = 160;
  specs.push_back(d160);
  // StreamingLLM sink tokens beside a left window: the sink blocks add to dq_accum tiles past their
  // window, ranked beside the window's adders (common::dq_add_turn).
  ProblemSpec sinks = full;
  sinks.causal = true;
  sinks.window_left = 100;
  sinks.sink_tokens = 70;
  specs.push_back(sinks);
  ProblemSpec sinks_wide = sinks;  // more sink blocks than the window has, at head dims 64 and 256
  sinks_wide.head_dim = 64;
  sinks_wide.window_left = 5;
  sinks_wide.sink_tokens = 200;
  specs.push_back(sinks_wide);
  sinks_wide.head_dim = 256;
  specs.push_back(sinks_wide);
  return specs;
}

// Varlen: a boundary block's TMA load reaches into the next sequence's rows (cuda_sm90; cuda_sm80
// zero-fills them). NaN and Inf in the middle sequence's q, k, v and dout must not leak into the
// other two sequences' dq, dk, dv through 0 · NaN in a product: those must match the gradients of
// clean inputs. Head dims 32, 64, 96, 128, 160 and 256 (160: bucket 192 on the D 256 layout, whose
// dQ path is its own), causal and not, GQA 2:1, the deterministic mode at head dims 128, 160 and 256.
TEST_P(CudaBackwardImpl, VarlenNeighbourNonFinite) {
  SKIP_WITHOUT_GPU();
  int ran = 0;
  for (int64_t head_dim : {32, 64, 96, 128, 160, 256})
    for (bool causal : {false, true})
      for (bool deterministic : {false, true}) {
        if (deterministic && head_dim != 128 && head_dim != 160 && head_dim != 256) continue;
        const ProblemSpec s =
            varlen_neighbour_spec(head_dim, causal, 41 + static_cast<uint64_t>(head_dim) + (causal ? 1 : 0));
        SCOPED_TRACE(s.describe() + (deterministic ? " deterministic" : ""));
        Problem pb(s);
        reference_forward_into(pb, NAN);
        const Problem exact = exact_backward(pb, NAN);
        const Problem same = same_precision_backward(pb, NAN);
        const int64_t q0 = pb.cu_seqlens_q[1], q1 = pb.cu_seqlens_q[2];
        const int64_t k0 = pb.cu_seqlens_k[1], k1 = pb.cu_seqlens_k[2];
        for (int64_t d = 0; d < head_dim; ++d) {
          const float bad = d % 2 ? INFINITY : NAN;
          for (int64_t h = 0; h < s.heads_q; ++h)
            for (int64_t r = q0; r < q1; ++r) {
              pb.q.set(0, r, h, d, bad);
              pb.dout.set(0, r, h, d, NAN);
            }
          for (int64_t h = 0; h < s.heads_kv; ++h)
            for (int64_t r = k0; r < k1; ++r) {
              pb.k.set(0, r, h, d, NAN);
              pb.v.set(0, r, h, d, bad);
            }
        }
        DeviceProblem dev;
        const Status up = dev.init(&pb);
        ASSERT_TRUE(up.ok()) << up.to_string();
        const Status st = run_backward(dev, GetParam(), NAN, deterministic);
        if (not_built(st) || routed_elsewhere(st)) continue;
        ASSERT_TRUE(st.ok()) << st.to_string();
        ++ran;
        // The middle sequence's own gradients (NaN: its inputs are) take the exact values, so that
        // the check compares the two others.
        for (int64_t d = 0; d < head_dim; ++d) {
          for (int64_t h = 0; h < s.heads_q; ++h)
            for (int64_t r = q0; r < q1; ++r) pb.dq.set(0, r, h, d, exact.dq.get(0, r, h, d));
          for (int64_t h = 0; h < s.heads_kv; ++h)
            for (int64_t r = k0; r < k1; ++r) {
              pb.dk.set(0, r, h, d, exact.dk.get(0, r, h, d));
              pb.dv.set(0, r, h, d, exact.dv.get(0, r, h, d));
            }
        }
        EXPECT_EQ(check_backward(pb, exact, pb.spec.dtype, nullptr, &same), "");
      }
  if (ran == 0) GTEST_SKIP() << "no head dim of 64, 96, 128, 256 built";
}

TEST_P(CudaBackwardImpl, Determinism) {
  SKIP_WITHOUT_GPU();
  int ran = 0;
  for (const ProblemSpec& spec : determinism_specs(GetParam())) {
    SCOPED_TRACE(spec.describe());
    Problem pb(spec);
    reference_forward_into(pb, NAN);
    DeviceProblem dev;
    const Status up = dev.init(&pb);
    ASSERT_TRUE(up.ok()) << up.to_string();
    Status st = run_backward(dev, GetParam(), NAN, /*deterministic=*/true);
    if (not_built(st) || routed_elsewhere(st)) continue;
    ASSERT_TRUE(st.ok()) << st.to_string();
    ++ran;
    const Problem exact = exact_backward(pb, NAN);
    const Problem same = same_precision_backward(pb, NAN);
    EXPECT_EQ(check_backward(pb, exact, pb.spec.dtype, nullptr, &same), "");
    const std::vector<unsigned char> dq1 = pb.dq.bytes, dk1 = pb.dk.bytes, dv1 = pb.dv.bytes;
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    for (int repeat = 0; repeat < 2; ++repeat) {  // another stream, then the default stream again
      st = run_backward(dev, GetParam(), NAN, /*deterministic=*/true, repeat == 0 ? stream : nullptr);
      ASSERT_TRUE(st.ok()) << st.to_string();
      EXPECT_TRUE(dq1 == pb.dq.bytes)
          << "dq differs between identical deterministic calls (repeat " << repeat << ")";
      EXPECT_TRUE(dk1 == pb.dk.bytes)
          << "dk differs between identical deterministic calls (repeat " << repeat << ")";
      EXPECT_TRUE(dv1 == pb.dv.bytes)
          << "dv differs between identical deterministic calls (repeat " << repeat << ")";
    }
    cudaStreamDestroy(stream);
  }
  if (ran == 0) GTEST_SKIP() << "no determinism shape built or served by this implementation";
}

TEST_P(CudaBackwardImpl, Workspace) {
  SKIP_WITHOUT_GPU();
  ProblemSpec spec = determinism_spec();
  if (GetParam() == Impl::kCudaSm90) spec.dropout_p = 0.0f;  // cuda_sm90 leaves dropout to cuda_sm80
  Problem pb(spec);
  reference_forward_into(pb, NAN);
  DeviceProblem dev;
  const Status up = dev.init(&pb);
  ASSERT_TRUE(up.ok()) << up.to_string();
  for (bool deterministic : {false, true}) {
    BwdParams p = backward_params(dev, GetParam(), NAN, deterministic, nullptr);
    int64_t need = -1;
    Status st = flashlab::backward_workspace_size(p, &need);
    if (not_built(st)) GTEST_SKIP() << st.message();
    ASSERT_TRUE(st.ok()) << st.to_string();
    // The layout (common/bwd_workspace.h), the same bytes for every implementation: D per row;
    // row_stats: 2 floats per row of whole 128-row tiles per sequence (300 -> 384 rows) · heads_q;
    // dQ accumulators: the same rows · heads_q · the head-dim bucket; deterministic: one int
    // semaphore per 64-row tile · heads_q; the dsink partials: one float per 64-row query block of
    // each sequence · heads_q (reserved always); GQA slices: rows · heads · head_dim.
    {
      const int64_t rows_q = 2 * 300, rows_k = 2 * 515, rows_q_tiles = 2 * 384;
      int64_t want = ((4 * 8 * rows_q + 255) / 256) * 256;
      want += ((4 * rows_q_tiles * 8 * 2 + 255) / 256) * 256;
      want += ((4 * rows_q_tiles * 8 * 128 + 255) / 256) * 256;
      want += ((4 * 2 * 5 * 8 + 255) / 256) * 256;  // dsink_part: 2 sequences × ceil(300 / 64) × 8 heads
      if (deterministic) want += ((4 * (rows_q_tiles / 64) * 8 + 255) / 256) * 256;
      want += 2 * ((4 * rows_k * (deterministic ? 8 : 2) * 128 + 255) / 256) * 256;
      EXPECT_EQ(need, want) << (deterministic ? "deterministic" : "atomic");
    }

    DeviceBuffer small;
    st = small.allocate(static_cast<size_t>(need - 256), "workspace");
    ASSERT_TRUE(st.ok()) << st.to_string();
    p.workspace = small.get();
    p.workspace_bytes = need - 256;
    st = dev.poison_backward_outputs();
    ASSERT_TRUE(st.ok()) << st.to_string();
    st = flashlab::attention_backward(p);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
    EXPECT_NE(st.message().find("needs " + std::to_string(need) + " bytes"), std::string::npos)
        << st.message();
    p.workspace = nullptr;
    p.workspace_bytes = need;
    st = flashlab::attention_backward(p);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
    EXPECT_NE(st.message().find("workspace is null"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("needs " + std::to_string(need) + " bytes"), std::string::npos)
        << st.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    st = dev.download_backward_outputs();
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_TRUE(all_poison(pb.dq) && all_poison(pb.dk) && all_poison(pb.dv)) << "an output was written";
  }
}

INSTANTIATE_TEST_SUITE_P(Impls, CudaBackwardImpl, ::testing::ValuesIn(production_cuda_impls(/*backward=*/true)),
                         impl_test_name);

#endif  // FLASHLAB_WITH_CUDA

}  // namespace
