// tests/gpu/test_cuda_forward.cpp — the production CUDA implementations' forward against the
// float64 reference. The GPU tests (Sweep, Determinism) run once for every production CUDA
// implementation this build compiled (production_cuda_impls(): cuda_sm80, later cuda_sm90), as
// Impls/CudaForwardImpl.<test>/<impl>; the others are about cuda_sm80 or need no GPU.
//
//   Sweep            a randomized sweep (FLASHLAB_SM80_SWEEP configurations, default 1000; seed
//                    FLASHLAB_SM80_SEED; FLASHLAB_SM80_FWD_BUCKET=D: bucket D's draws only) over
//                    dtype, head dims (buckets and multiples of 8 between),
//                    seqlens 1..4224 with seqlen_q != seqlen_k, GQA/MQA, causal in both alignments,
//                    windows, softcap, ALiBi, dropout, varlen with empty sequences, padded strides,
//                    peaky inputs, zero and negative softmax scales. Configurations whose bucket or
//                    dtype this build did not compile are skipped and counted.
//   Determinism      the same call twice (second time on another stream) gives identical bytes.
//   VarlenNeighbourNonFinite  NaN / Inf in one packed sequence's K and V leave its neighbours'
//                    outputs exact (a last key block reaches into the next sequence's rows).
//   Sm80Errors       cuda_sm80's unsupported combinations name the rule (no GPU needed).
//   AutoPicks        kAuto selects cuda_sm80 for a CUDA call it supports (the production path).
//   CheckerSelfTest  the tolerance accepts a correct CPU implementation and rejects a 1% error
//                    (no GPU needed: a test that cannot fail is a defect).
//   ToleranceCoversKernelNumerics  ... and accepts the kernel's own rounding (P in the dtype),
//                    emulated on the CPU.
// Without a CUDA device every GPU test is skipped (GTEST_SKIP) and the binary exits 0, so CI, which
// has no GPU, compiles and runs it. Under compute-sanitizer use a small sweep:
//   FLASHLAB_SM80_SWEEP=40 FLASHLAB_SM80_MAX_SEQLEN=300 compute-sanitizer --tool memcheck
//     build/tests/gpu/test_cuda_forward --gtest_filter='*Sweep*'
//
// Tolerance (STYLE.md rule 10). Inputs are rounded to the dtype once; then
//   exact  the reference (float64, impl kReference) on an fp32 copy of those inputs;
//   base   exact rounded to the dtype: the error of an implementation that stored perfect results;
//   gpu    the implementation on the dtype tensors;
// and requires, over the logical elements of out:
//   max|gpu - exact| <= 2 max|base - exact| + u · unit      rel_l2(gpu) <= 2 rel_l2(base) + u / 4
// where u is the dtype's unit roundoff (bf16 2^-8, fp16 2^-11) and unit = max|exact|. The kernel
// rounds P to the dtype before P·V (as every FlashAttention kernel does); that error is at most
// one more rounding of each term, which the factor 2 and the u floor cover. LSE (fp32 everywhere):
// |gpu - exact| <= 1e-4 · (1 + |exact|), and -inf (a row that sees no key) must match exactly.
// Outputs are poisoned (0xFF bytes: NaN in fp16/bf16/fp32) before each run; NaN never passes, and
// the padding between rows must still hold the poison afterwards (the kernel writes nothing else).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "api/backend.h"
#include "cuda/common/kernel_args.h"  // head_dim_bucket
#include "cuda/sm90/tile_size.h"        // fwd_persistent (host-only constexpr rules)
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

// Empty string when `out` / `lse` pass against `exact`, else what failed.
std::string check_forward(const HostTensor& out, const std::vector<float>& lse, const Problem& exact,
                          DType dtype, size_t lse_count) {
  const double u = unit_roundoff(dtype);
  const Errors base = measure(out, exact.out, true, dtype);
  const Errors got = measure(out, exact.out, false, dtype);
  std::string why;
  if (got.nonfinite > 0) why += " out has " + std::to_string(got.nonfinite) + " non-finite values;";
  const double max_tol = 2 * base.max_abs + u * base.ref_max;
  if (!(got.max_abs <= max_tol))
    why += " out max_abs " + std::to_string(got.max_abs) + " > " + std::to_string(max_tol) + ";";
  const double rel_tol = 2 * base.rel_l2() + u / 4;
  if (base.ref_sq > 0 && !(got.rel_l2() <= rel_tol))
    why += " out rel_l2 " + std::to_string(got.rel_l2()) + " > " + std::to_string(rel_tol) + ";";
  int64_t lse_bad = 0;
  double lse_worst = 0;
  for (size_t i = 0; i < lse_count; ++i) {
    const double w = exact.lse[i], g = lse[i];
    bool ok;
    if (std::isinf(w) && w < 0)
      ok = std::isinf(g) && g < 0;
    else
      ok = std::isfinite(g) && std::fabs(g - w) <= 1e-4 * (1 + std::fabs(w));
    if (!ok) {
      ++lse_bad;
      lse_worst = std::isfinite(g) ? std::max(lse_worst, std::fabs(g - w)) : INFINITY;
    }
  }
  if (lse_bad > 0)
    why += " lse: " + std::to_string(lse_bad) + " of " + std::to_string(lse_count) + " wrong (worst " +
           std::to_string(lse_worst) + ");";
  return why;
}

// The exact forward: the reference on an fp32 copy of the (already rounded) inputs.
Problem exact_forward(const Problem& pb, float softmax_scale) {
  ProblemSpec s = pb.spec;
  s.dtype = DType::kFloat32;
  if (pb.varlen()) s.batch = 1;  // Problem recomputes batch from lens
  Problem ex(s);
  HostTensor* dst[3] = {&ex.q, &ex.k, &ex.v};
  const HostTensor* src[3] = {&pb.q, &pb.k, &pb.v};
  for (int t = 0; t < 3; ++t)
    for (int64_t b = 0; b < src[t]->batch; ++b)
      for (int64_t r = 0; r < src[t]->rows; ++r)
        for (int64_t h = 0; h < src[t]->heads; ++h)
          for (int64_t d = 0; d < src[t]->dim; ++d) dst[t]->set(b, r, h, d, src[t]->get(b, r, h, d));
  FwdParams p = ex.fwd_params(Impl::kReference);
  p.softmax_scale = softmax_scale;
  const Status st = flashlab::attention_forward(p);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return ex;
}

size_t lse_count(const Problem& pb) {
  if (pb.varlen()) return static_cast<size_t>(pb.spec.heads_q * pb.cu_seqlens_q.back());
  return static_cast<size_t>(pb.spec.batch * pb.spec.heads_q * pb.spec.seqlen_q);
}

// ---- Checker self-test (runs everywhere) -------------------------------------------------------

// The kernel's numerics on the CPU, for fixed-length causal/full problems without score
// modifications: fp32 scores and softmax, P rounded to the dtype before P·V (l is not), O rounded.
// The GPU kernel additionally uses exp2 with the scale folded in; that changes P by ~1e-7.
void emulate_kernel_numerics(Problem& pb) {
  const ProblemSpec& s = pb.spec;
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const int64_t shift = s.causal_align == CausalAlign::kBottomRight ? s.seqlen_k - s.seqlen_q : 0;
  std::vector<float> p(static_cast<size_t>(s.seqlen_k));
  std::vector<double> o(static_cast<size_t>(s.head_dim));
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h) {
      const int64_t hk = h / (s.heads_q / s.heads_kv);
      for (int64_t i = 0; i < s.seqlen_q; ++i) {
        float m = -INFINITY;
        for (int64_t j = 0; j < s.seqlen_k; ++j) {
          float acc = 0;
          for (int64_t d = 0; d < s.head_dim; ++d) acc += pb.q.get(b, i, h, d) * pb.k.get(b, j, hk, d);
          p[j] = (s.causal && j > i + shift) ? -INFINITY : acc * scale;
          m = std::max(m, p[j]);
        }
        float l = 0;
        for (int64_t j = 0; j < s.seqlen_k; ++j) {
          p[j] = m == -INFINITY ? 0.0f : std::exp(p[j] - m);
          l += p[j];
          p[j] = flashlab::round_to(s.dtype, p[j]);
        }
        std::fill(o.begin(), o.end(), 0.0);
        for (int64_t j = 0; j < s.seqlen_k; ++j)
          for (int64_t d = 0; d < s.head_dim; ++d) o[d] += p[j] * pb.v.get(b, j, hk, d);
        for (int64_t d = 0; d < s.head_dim; ++d)
          pb.out.set(b, i, h, d, l > 0 ? static_cast<float>(o[d] / l) : 0.0f);
        pb.lse[b * pb.lse_batch_stride + h * pb.lse_head_stride + i] = l > 0 ? m + std::log(l) : -INFINITY;
      }
    }
}

TEST(CudaForward, ToleranceCoversKernelNumerics) {
  // A correct kernel rounds P to the dtype: the check must accept that, also for peaky rows.
  for (DType dt : {DType::kBFloat16, DType::kFloat16})
    for (float input_scale : {1.0f, 2.5f, 6.0f})
      for (bool causal : {false, true}) {
        ProblemSpec s;
        s.batch = 1;
        s.seqlen_q = 64;
        s.seqlen_k = 203;
        s.heads_q = 4;
        s.heads_kv = 2;
        s.head_dim = 64;
        s.dtype = dt;
        s.causal = causal;
        s.input_scale = input_scale;
        s.data_seed = 7 + static_cast<uint64_t>(input_scale * 10);
        Problem pb(s);
        const Problem exact = exact_forward(pb, NAN);
        pb.poison_forward_outputs();
        emulate_kernel_numerics(pb);
        EXPECT_EQ(check_forward(pb.out, pb.lse, exact, dt, lse_count(pb)), "")
            << flashlab::to_string(dt) << " input_scale " << input_scale << (causal ? " causal" : "");
      }
}

TEST(CudaForward, CheckerSelfTest) {
  for (DType dt : {DType::kBFloat16, DType::kFloat16}) {
    const ProblemSpec s = checker_self_test_spec(dt);
    Problem pb(s);
    const Problem exact = exact_forward(pb, NAN);
    // A correct implementation with the kernel's precision (fp32 compute, dtype output) passes.
    pb.poison_forward_outputs();
    ASSERT_TRUE(flashlab::attention_forward(pb.fwd_params(Impl::kCpuFlash)).ok());
    EXPECT_EQ(check_forward(pb.out, pb.lse, exact, dt, lse_count(pb)), "") << flashlab::to_string(dt);
    // One element off by 1% of the output scale fails; so does one unwritten (NaN) element.
    const Errors e = measure(pb.out, exact.out, false, dt);
    HostTensor bad = pb.out;
    bad.set(1, 50, 3, 7, bad.get(1, 50, 3, 7) + 0.01f * static_cast<float>(e.ref_max));
    EXPECT_NE(check_forward(bad, pb.lse, exact, dt, lse_count(pb)), "");
    bad = pb.out;
    bad.set(0, 0, 0, 0, NAN);
    EXPECT_NE(check_forward(bad, pb.lse, exact, dt, lse_count(pb)), "");
    std::vector<float> bad_lse = pb.lse;
    bad_lse[5] += 1e-2f;
    EXPECT_NE(check_forward(pb.out, bad_lse, exact, dt, lse_count(pb)), "");
  }
}

// ---- cuda_sm80's errors (no GPU needed: the rules come before any device query) ----------------

void expect_unsupported(const AttentionConfig& c, bool backward, const std::string& part) {
  const Status st = flashlab::detail::sm80_supports(c, backward);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.to_string();
  EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
}

TEST(CudaForward, Sm80Errors) {
  AttentionConfig c = sm80_config();
  c.dtype = DType::kFloat32;
  expect_unsupported(c, false, "dtype fp32 is not supported by impl cuda_sm80: supported bf16, fp16");
  c = sm80_config();
  c.head_dim = 260;
  expect_unsupported(c, false, "head_dim (260) is not supported by impl cuda_sm80: supported multiples of 8");
  c.head_dim = 36;
  expect_unsupported(c, false, "head_dim (36) is not supported by impl cuda_sm80");
  c = sm80_config();
  c.seqlen_k = (int64_t(1) << 30) + 1;
  expect_unsupported(c, false, "seqlen_k");
  c = sm80_config();
  c.heads_q = c.heads_kv = 70000;
  expect_unsupported(c, false, "heads_q (70000) is not supported by impl cuda_sm80: supported <= 65535");
  c = sm80_config();
  c.device = Device::kCPU;
  expect_unsupported(c, false, "runs on cuda");
  // Attention sinks: cuda_sm80 and cuda_sm90 take them (the sweeps check them); the learning
  // kernels refuse them clearly.
  c = sm80_config();
  const float sinks[1] = {0.0f};  // never read: the rule needs only the pointer
  c.sink_logits = sinks;
#if defined(FLASHLAB_WITH_CUDA)
  for (bool backward : {false, true}) {
    const flashlab::Status st = flashlab::detail::learn_supports(4, c, backward);
    EXPECT_NE(st.message().find("sink_logits (attention sinks) is not supported by impl learn_v4"), std::string::npos)
        << st.to_string();
  }
#endif
}

#if defined(FLASHLAB_WITH_CUDA_SM90)
// cuda_sm90's refusals (no GPU needed: the rules come before any device query). What it refuses
// for a feature names cuda_sm80, which impl=auto then picks; strides TMA cannot describe are
// refused by sm90_forward_accepts (the dispatcher asks it before choosing the row).
void expect_sm90_unsupported(const AttentionConfig& c, bool backward, const std::string& part) {
  const Status st = flashlab::detail::sm90_supports(c, backward);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.to_string();
  EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
}

// cuda_sm90's dynamic tile scheduler (tile_size.h fwd_counts_tiles, fwd_l2_group; no GPU needed):
// the calls whose tiles differ in work, of fixed lengths and without a left window, at head dims up
// to 128 and with more than 4 key blocks, ask for the counter's workspace; the others ask for none.
// The L2 groups hold 32 MiB of K and V.
TEST(CudaForward, Sm90DynamicRule) {
  using flashlab::sm90::fwd_dynamic;
  using flashlab::sm90::fwd_work_shape;
  auto workspace = [](const FwdParams& p) {
    int64_t bytes = -1;
    EXPECT_TRUE(flashlab::detail::sm90_forward_workspace_size(p, &bytes).ok());
    return bytes;
  };
  FwdParams p;
  p.batch = 4;
  p.heads_q = p.heads_kv = 16;
  p.seqlen_q = p.seqlen_k = 4096;
  p.head_dim = 128;
  EXPECT_EQ(workspace(p), 0);  // no mask: every tile the same work (static waves)
  p.causal = true;
  EXPECT_EQ(workspace(p), flashlab::sm90::kFwdTileCounterBytes);
  p.causal_align = flashlab::CausalAlign::kTopLeft;
  EXPECT_EQ(workspace(p), flashlab::sm90::kFwdTileCounterBytes);
  p.window_left = 256;  // a sliding window: static
  EXPECT_EQ(workspace(p), 0);
  p.window_left = -1;
  p.sink_tokens = 4;  // without a left window sink tokens change no mask
  EXPECT_EQ(workspace(p), flashlab::sm90::kFwdTileCounterBytes);
  p.causal = false;
  p.window_right = 64;  // a right window alone: tiles differ
  EXPECT_EQ(workspace(p), flashlab::sm90::kFwdTileCounterBytes);
  p.window_right = -1;
  p.causal = true;
  p.seqlen_k = 512;  // 4 key blocks: static waves, no workspace
  EXPECT_EQ(workspace(p), 0);
  p.seqlen_k = 513;
  EXPECT_EQ(workspace(p), flashlab::sm90::kFwdTileCounterBytes);
  p.head_dim = 136;  // bucket 192: its kernels do not count
  EXPECT_EQ(workspace(p), 0);

  flashlab::common::FwdArguments a;
  a.seq.batch = 16;
  a.seq.heads_q = 16;
  a.seq.seqlen_q = a.seq.seqlen_k = 1024;
  a.score.window_right = 0;
  EXPECT_TRUE(fwd_dynamic(fwd_work_shape(a)));
  EXPECT_EQ(flashlab::sm90::fwd_l2_group(a, 128, 2), 64);  // 512 KiB of K and V a pair
  a.seq.batch = 1;
  a.seq.seqlen_q = a.seq.seqlen_k = 16384;
  EXPECT_EQ(flashlab::sm90::fwd_l2_group(a, 128, 2), 4);
  a.in.kv_group = 4;  // GQA 4:1: four query heads read one K and V
  EXPECT_EQ(flashlab::sm90::fwd_l2_group(a, 128, 2), 16);  // every pair (16)
  a.seq.seqlen_q = a.seq.seqlen_k = 1 << 22;
  a.in.kv_group = 1;
  EXPECT_EQ(flashlab::sm90::fwd_l2_group(a, 256, 2), 1);  // 4 GiB a pair: groups of one
  int32_t cu[2] = {0, 8};
  a.seq.cu_seqlens_q = a.seq.cu_seqlens_k = cu;  // varlen: static
  EXPECT_FALSE(fwd_dynamic(fwd_work_shape(a)));
}

// cuda_sm90's launch rule, persistent CTAs or one tile per CTA (tile_size.h fwd_persistent; no GPU
// needed): the shapes measured both ways on the H200 in session 40 (docs/perf.md) get the faster
// mode, except hdim 192 at 1.5k (14 key blocks: persistent, 1.04 of one tile per CTA; kept by the
// key-block rule, which hdim 256 at 1,152 keys needs: 0.963).
TEST(CudaForward, Sm90PersistentRule) {
  using flashlab::sm90::fwd_persistent;
  constexpr int kSms = 132;
  struct Case {
    int64_t batch, heads, seqlen;
    int head_dim, block_m, block_n;
    bool persistent;  // the faster mode measured (or the rule's, where noted above)
  };
  const Case causal[] = {
      {16, 16, 1024, 128, 128, 128, true},   // 0.868
      {8, 16, 2048, 128, 128, 128, true},    // 0.946
      {4, 16, 4096, 128, 128, 128, false},   // 1.059
      {2, 16, 8192, 128, 128, 176, false},   // 1.142
      {16, 32, 1024, 64, 128, 128, true},    // 0.833
      {6, 32, 3072, 64, 192, 128, true},     // 0.974: 24 key blocks, 16 waves of tiles
      {2, 32, 4096, 64, 192, 128, false},    // 1.260: 11 waves
      {4, 32, 4096, 64, 192, 128, true},     // 0.936: 21 waves
      {8, 32, 4096, 64, 192, 128, true},     // 0.950
      {2, 32, 8192, 64, 192, 128, false},    // 1.024
      {4, 64, 4096, 32, 128, 128, true},     // 0.945
      {2, 64, 8192, 32, 128, 128, true},     // 0.995 (a tie)
      {16, 8, 1024, 192, 128, 112, true},    // 0.930
      {12, 16, 1536, 192, 128, 112, true},   // 1.042 (see above)
      {4, 8, 4096, 192, 128, 112, false},    // 1.077
      {16, 8, 1152, 256, 128, 80, true},     // 0.963
      {8, 8, 2048, 256, 128, 80, false},     // 1.049
      {8, 16, 2560, 96, 128, 128, true},     // 0.958
      {4, 16, 4096, 96, 128, 128, false},    // 1.055
  };
  for (const Case& k : causal) {
    const int64_t key_blocks = (k.seqlen + k.block_n - 1) / k.block_n;
    const int64_t tiles = (k.seqlen + k.block_m - 1) / k.block_m * k.heads * k.batch;
    EXPECT_EQ(fwd_persistent(false, true, k.seqlen, key_blocks, tiles, k.head_dim, kSms), k.persistent)
        << "causal b" << k.batch << " h" << k.heads << " s" << k.seqlen << " d" << k.head_dim;
    // A sliding window (or varlen) keeps the key-block rule alone.
    EXPECT_EQ(fwd_persistent(false, false, k.seqlen, key_blocks, tiles, k.head_dim, kSms), key_blocks <= 16);
    // Tiles of equal work (no mask, fixed lengths): always persistent.
    EXPECT_TRUE(fwd_persistent(true, true, k.seqlen, key_blocks, tiles, k.head_dim, kSms));
  }
}

TEST(CudaForward, Sm90Errors) {
  AttentionConfig c = sm80_config();
  c.impl = Impl::kCudaSm90;
  AttentionConfig d = c;
  for (int64_t hd : {32, 136, 192}) {  // every bucket is served (what follows may refuse: no GPU, not built)
    d.head_dim = hd;
    const Status st = flashlab::detail::sm90_supports(d, /*backward=*/true);
    EXPECT_EQ(st.message().find("the backward at head_dim"), std::string::npos) << st.message();
  }
  d = c;
  d.dropout_p = 0.1f;
  for (bool backward : {false, true})
    expect_sm90_unsupported(d, backward, "dropout is not supported by impl cuda_sm90 yet: impl "
                                         "cuda_sm80 serves it, and impl=auto picks cuda_sm80 for such calls");
  d = c;
  const int32_t cu[3] = {0, 64, 128};  // never read: the rule needs only the pointers
  d.cu_seqlens_q = d.cu_seqlens_k = cu;
  expect_sm90_unsupported(d, false, "cu_seqlens (varlen) without total_q / total_k (the packed tensors' rows) is "
                                    "not supported by impl cuda_sm90");
  d.total_q = d.total_k = 128;  // taken then, at every head dim
  d.total_k = int64_t(INT32_MAX) + 1;
  expect_sm90_unsupported(d, false, "a packed tensor of more than 2^31 - 1 rows");
  d.total_k = 128;
  d.head_dim = 256;  // the zeroing warps of the producer warpgroup (flash_fwd_kernel.h, zero_v_helper)
  for (bool backward : {false, true})
    EXPECT_EQ(flashlab::detail::sm90_supports(d, backward).message().find("cu_seqlens"), std::string::npos);
  d = c;
  d.dtype = DType::kFloat32;
  expect_sm90_unsupported(d, false, "dtype fp32 is not supported by impl cuda_sm90: supported bf16, fp16");
  d = c;
  d.head_dim = 260;
  expect_sm90_unsupported(d, false, "head_dim (260) is not supported by impl cuda_sm90");

  // Strides: a broadcast head (stride 0 over 4 heads) is legal for cuda_sm80, not for TMA.
  FwdParams p;
  static_cast<AttentionConfig&>(p) = c;
  alignas(16) static uint16_t buf[8];  // never read: only pointers and strides are checked
  p.q = p.k = p.v = flashlab::contiguous(buf, c.seqlen_q, c.heads_q, c.head_dim);
  p.out = flashlab::contiguous(static_cast<void*>(buf), c.seqlen_q, c.heads_q, c.head_dim);
  EXPECT_TRUE(flashlab::detail::sm90_forward_accepts(p).ok());
  p.k.head_stride = 0;
  const Status st = flashlab::detail::sm90_forward_accepts(p);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.to_string();
  EXPECT_NE(st.message().find("k.head_stride (0) is not supported by impl cuda_sm90: TMA needs a positive stride"),
            std::string::npos)
      << st.message();

  // The backward's tensors: dout is loaded by TMA too; the deterministic mode runs here too.
  BwdParams b;
  static_cast<AttentionConfig&>(b) = c;
  b.q = b.k = b.v = b.out = b.dout = flashlab::contiguous(static_cast<const void*>(buf), c.seqlen_q, c.heads_q, c.head_dim);
  b.dq = b.dk = b.dv = flashlab::contiguous(static_cast<void*>(buf), c.seqlen_q, c.heads_q, c.head_dim);
  EXPECT_TRUE(flashlab::detail::sm90_backward_accepts(b).ok());
  b.dout.row_stride = 0;
  Status bst = flashlab::detail::sm90_backward_accepts(b);
  EXPECT_EQ(bst.code(), StatusCode::kUnsupported) << bst.to_string();
  EXPECT_NE(bst.message().find("dout.row_stride (0) is not supported by impl cuda_sm90"), std::string::npos)
      << bst.message();
  b.dout = b.q;
  b.deterministic = true;
  bst = flashlab::detail::sm90_backward_accepts(b);
  EXPECT_TRUE(bst.ok()) << bst.to_string();
  // Head dim 256: the deterministic mode and the default one are both served.
  b.head_dim = 256;
  b.q = b.k = b.v = b.out = b.dout = flashlab::contiguous(static_cast<const void*>(buf), c.seqlen_q, c.heads_q, 256);
  b.dq = b.dk = b.dv = flashlab::contiguous(static_cast<void*>(buf), c.seqlen_q, c.heads_q, 256);
  bst = flashlab::detail::sm90_backward_accepts(b);
  EXPECT_TRUE(bst.ok()) << bst.to_string();
  b.deterministic = false;
  EXPECT_TRUE(flashlab::detail::sm90_backward_accepts(b).ok());
  d = b;  // the head-dim rule lets 256 through (what follows it may refuse: no GPU, bucket not built)
  const Status s256 = flashlab::detail::sm90_supports(d, /*backward=*/true);
  EXPECT_EQ(s256.message().find("the backward at head_dim"), std::string::npos) << s256.message();
}
#endif

// ---- GPU tests -----------------------------------------------------------------------------------

#if defined(FLASHLAB_WITH_CUDA)

using flashlab::testing::DeviceBuffer;
using flashlab::testing::DeviceProblem;

#define SKIP_WITHOUT_GPU() \
  if (!have_gpu())         \
  GTEST_SKIP() << "no CUDA device: " << flashlab::to_string(GetParam()) << " forward not exercised"

// The GPU tests, once per production CUDA implementation built (the parameter).
class CudaForwardImpl : public ::testing::TestWithParam<Impl> {};

// `impl`'s forward on the problem mirrored in `dev` (same strides, padding included): poisons the
// outputs, runs, copies them back into the host problem's out / lse. With `workspace`, the
// forward workspace forward_workspace_size() asks for, poisoned (cuda_sm90's causal calls: the
// dynamic tile scheduler's counter, which the launch must zero); without, none (the static
// schedule).
Status run_forward(DeviceProblem& dev, Impl impl, float softmax_scale, void* stream = nullptr, bool workspace = true) {
  FLASHLAB_RETURN_IF_ERROR(dev.poison_forward_outputs());
  FwdParams p = dev.fwd_params(impl, stream);
  p.softmax_scale = softmax_scale;
  DeviceBuffer ws;
  if (workspace) {
    int64_t bytes = 0;
    FLASHLAB_RETURN_IF_ERROR(flashlab::forward_workspace_size(p, &bytes));
    FLASHLAB_RETURN_IF_ERROR(ws.allocate(static_cast<size_t>(bytes), "forward workspace"));
    FLASHLAB_RETURN_IF_ERROR(ws.poison());
    p.workspace = ws.get();
    p.workspace_bytes = bytes;
  }
  const Status st = flashlab::attention_forward(p);
  if (!st.ok()) return st;
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) return Status(StatusCode::kDeviceError, cudaGetErrorString(e));
  FLASHLAB_RETURN_IF_ERROR(dev.download_forward_outputs());
  return st;
}

// Whether `impl` takes the configuration `s` (its forward run once, the result dropped).
Status run_forward_status_only(const ProblemSpec& s, Impl impl) {
  Problem pb(s);
  DeviceProblem dev;
  FLASHLAB_RETURN_IF_ERROR(dev.init(&pb));
  return run_forward(dev, impl, NAN);
}

// One random configuration of the sweep, with its softmax scale (NaN: the default).
struct SweepCase {
  ProblemSpec spec;
  float scale = NAN;
};

SweepCase random_case(std::mt19937_64& rng) {
  auto pick = [&](std::initializer_list<int64_t> v) { return draw_pick(rng, v); };
  auto chance = [&](double p) { return draw_chance(rng, p); };
  SweepCase c;
  ProblemSpec& s = c.spec;
  s.dtype = chance(0.5) ? DType::kBFloat16 : DType::kFloat16;
  s.head_dim = chance(0.6) ? pick({32, 64, 96, 128, 192, 256})
                           : 8 * std::uniform_int_distribution<int64_t>(1, 32)(rng);
  s.seqlen_q = pick({1, 17, 64, 113, 128, 203, 256, 1023});
  s.seqlen_k = chance(0.5) ? s.seqlen_q : pick({1, 17, 64, 113, 128, 203, 256, 1023});
  if (chance(0.02)) {  // long sequences: one head of a small bucket keeps the reference affordable
    s.seqlen_q = s.seqlen_k = 4224;
    s.head_dim = std::min<int64_t>(s.head_dim, 64);
  }
  s.heads_kv = s.seqlen_q == 4224 ? 1 : pick({1, 2, 3});
  s.heads_q = s.heads_kv * pick({1, 1, 2, 4, 8});
  draw_features(rng, s, &c.scale);
  s.data_seed = rng();
  // FLASHLAB_SM80_MAX_SEQLEN caps the lengths; <= ~2e8 multiply-adds per reference product.
  cap_and_fit(s, env_int("FLASHLAB_SM80_MAX_SEQLEN", 1 << 30), 200'000'000);
  return c;
}

TEST_P(CudaForwardImpl, Sweep) {
  SKIP_WITHOUT_GPU();
  const int n = env_int("FLASHLAB_SM80_SWEEP", 1000);
  std::mt19937_64 rng(static_cast<uint64_t>(env_int("FLASHLAB_SM80_SEED", 2024)));
  // FLASHLAB_SM80_FWD_BUCKET=D: only the draws of head-dim bucket D, n of them (the others drawn
  // and dropped, so a seed gives the same configurations with and without it).
  const int only_bucket = env_int("FLASHLAB_SM80_FWD_BUCKET", 0);
  int ran = 0, skipped = 0, routed = 0, failed = 0, with_sinks = 0, with_sink_tokens = 0;
  for (int i = 0, drawn = 0; i < n && drawn < 50 * n; ++drawn) {
    const SweepCase c = random_case(rng);
    if (only_bucket != 0 && flashlab::common::head_dim_bucket(static_cast<int>(c.spec.head_dim)) != only_bucket)
      continue;
    ++i;
    Problem pb(c.spec);
    DeviceProblem dev;
    const Status up = dev.init(&pb);
    ASSERT_TRUE(up.ok()) << up.to_string();
    // One draw in four without a forward workspace: cuda_sm90's causal calls then run the static
    // schedule, the others its dynamic one.
    const bool workspace = drawn % 4 != 3;
    const Status st = run_forward(dev, GetParam(), c.scale, nullptr, workspace);
    const std::string what = "case " + std::to_string(drawn) + ": " + pb.spec.describe() +
                             (std::isnan(c.scale) ? "" : " scale " + std::to_string(c.scale)) +
                             (workspace ? "" : " (no workspace)");
    if (not_built(st)) {
      ++skipped;
      continue;
    }
    if (routed_elsewhere(st)) {
      ++routed;
      continue;
    }
    ASSERT_TRUE(st.ok()) << what << ": " << st.to_string();
    ++ran;
    with_sinks += pb.spec.sinks ? 1 : 0;
    with_sink_tokens += pb.spec.sink_tokens > 0 ? 1 : 0;
    const Problem exact = exact_forward(pb, c.scale);
    const std::string why = check_forward(pb.out, pb.lse, exact, pb.spec.dtype, lse_count(pb));
    const int64_t pad = written_padding(pb.out);
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
      "%d failed\n",
      flashlab::to_string(GetParam()), ran, with_sinks, with_sink_tokens, skipped, routed, failed);
  EXPECT_GT(ran, 0) << "every configuration was skipped: build with FLASHLAB_HEAD_DIMS / FLASHLAB_DTYPES";
}

// Varlen: a sequence's last key block reaches into the next sequence's rows (cuda_sm90 loads the
// whole block by TMA; cuda_sm80 zero-fills them). Non-finite values there must not leak into this
// sequence's output through 0 · NaN in P·V: the middle sequence's K and V are NaN and +Inf, and
// the other two sequences (one before it, one after: the packed tensor's end) must match the
// reference of clean inputs. Head dims 64, 128, 192 and 256 (cuda_sm90: the consumers zero V's
// neighbour rows up to 192, helper warps at 256), causal and not, GQA 2:1.
TEST_P(CudaForwardImpl, VarlenNeighbourNonFinite) {
  SKIP_WITHOUT_GPU();
  int ran = 0;
  for (int64_t head_dim : {64, 128, 192, 256})
    for (bool causal : {false, true}) {
      const ProblemSpec s =
          varlen_neighbour_spec(head_dim, causal, 31 + static_cast<uint64_t>(head_dim) + (causal ? 1 : 0));
      Problem pb(s);
      const Problem exact = exact_forward(pb, NAN);
      const int64_t k0 = pb.cu_seqlens_k[1], k1 = pb.cu_seqlens_k[2];
      for (int64_t r = k0; r < k1; ++r)
        for (int64_t h = 0; h < s.heads_kv; ++h)
          for (int64_t d = 0; d < head_dim; ++d) {
            pb.k.set(0, r, h, d, NAN);
            pb.v.set(0, r, h, d, (r + d) % 2 ? INFINITY : NAN);
          }
      DeviceProblem dev;
      const Status up = dev.init(&pb);
      ASSERT_TRUE(up.ok()) << up.to_string();
      const Status st = run_forward(dev, GetParam(), NAN);
      if (not_built(st) || routed_elsewhere(st)) continue;
      ASSERT_TRUE(st.ok()) << st.to_string();
      ++ran;
      // The middle sequence's own rows (NaN: they attend to NaN) take the reference's values, so
      // that the check compares the two others.
      for (int64_t r = pb.cu_seqlens_q[1]; r < pb.cu_seqlens_q[2]; ++r)
        for (int64_t h = 0; h < s.heads_q; ++h) {
          for (int64_t d = 0; d < head_dim; ++d) pb.out.set(0, r, h, d, exact.out.get(0, r, h, d));
          pb.lse[h * pb.lse_head_stride + r] = exact.lse[h * exact.lse_head_stride + r];
        }
      EXPECT_EQ(check_forward(pb.out, pb.lse, exact, pb.spec.dtype, lse_count(pb)), "")
          << "head_dim " << head_dim << (causal ? " causal" : "");
    }
  if (ran == 0) GTEST_SKIP() << "no head dim of 64, 128, 192, 256 built";
}

// StreamingLLM sink tokens without a left window change no mask (mask.h sink_tokens_change_mask):
// every impl must take the call, cuda_sm90's forward at head dim 256 too (which refuses them beside a
// left window), and give the reference's answer. The sweep draws sink tokens only beside a left
// window. Causal (both alignments, seqlen_q != seqlen_k), a right window alone, and no mask.
TEST_P(CudaForwardImpl, SinkTokensWithoutLeftWindow) {
  SKIP_WITHOUT_GPU();
  int ran = 0;
  for (int64_t head_dim : {64, 192, 256})
    for (int mask = 0; mask < 3; ++mask) {
      ProblemSpec s = checker_self_test_spec(DType::kBFloat16);  // 2 x 113 x 203, GQA 4/2, inputs x 2
      s.head_dim = head_dim;
      s.causal = mask == 0;
      s.causal_align = head_dim == 192 ? CausalAlign::kTopLeft : CausalAlign::kBottomRight;
      if (mask == 1) s.window_right = 17;
      s.sink_tokens = 4;
      s.data_seed = 77 + static_cast<uint64_t>(head_dim) + mask;
      Problem pb(s);
      DeviceProblem dev;
      const Status up = dev.init(&pb);
      ASSERT_TRUE(up.ok()) << up.to_string();
      const Status st = run_forward(dev, GetParam(), NAN);
      if (not_built(st)) continue;
      ASSERT_TRUE(st.ok()) << pb.spec.describe() << ": " << st.to_string();
      ++ran;
      EXPECT_EQ(check_forward(pb.out, pb.lse, exact_forward(pb, NAN), pb.spec.dtype, lse_count(pb)), "")
          << pb.spec.describe();
      EXPECT_EQ(written_padding(pb.out), 0) << pb.spec.describe();
    }
  if (ran == 0) GTEST_SKIP() << "no head dim of 64, 192, 256 built";
}

TEST_P(CudaForwardImpl, Determinism) {
  SKIP_WITHOUT_GPU();
  ProblemSpec s;
  s.batch = 2;
  s.seqlen_q = 300;
  s.seqlen_k = 515;
  s.heads_q = 8;
  s.heads_kv = 2;
  s.head_dim = 128;
  s.causal = true;
  s.dropout_p = 0.2f;  // where the implementation has dropout; else the same call without it
  if (routed_elsewhere(run_forward_status_only(s, GetParam()))) s.dropout_p = 0.0f;
  Problem pb(s);
  DeviceProblem dev;
  const Status up = dev.init(&pb);
  ASSERT_TRUE(up.ok()) << up.to_string();
  Status st = run_forward(dev, GetParam(), NAN);
  if (not_built(st)) GTEST_SKIP() << st.message();
  ASSERT_TRUE(st.ok()) << st.to_string();
  const std::vector<unsigned char> out1 = pb.out.bytes;
  const std::vector<float> lse1 = pb.lse;
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  st = run_forward(dev, GetParam(), NAN, stream);
  cudaStreamDestroy(stream);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_TRUE(out1 == pb.out.bytes) << "out differs between two identical calls";
  EXPECT_EQ(std::memcmp(lse1.data(), pb.lse.data(), lse1.size() * sizeof(float)), 0);
}

// cuda_sm90's dynamic tile scheduler (fwd_launch.h): a tile computes the same bits whichever CTA
// takes it and when, so the counter's order must reproduce the static waves' output exactly, and
// both must match the reference. Forced both ways (FLASHLAB_SM90_FWD_DYNAMIC=1 / 0) with 3 CTAs
// (FLASHLAB_SM90_FWD_CTAS), so that each CTA takes many tiles: causal both alignments,
// seqlen_q != seqlen_k both ways, GQA, head dims 64 and 128, and a right window alone. For other
// impls the knobs change nothing and the test checks the same. Then: a workspace below
// forward_workspace_size() is refused (kInvalidArgument) with nothing written.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

TEST_P(CudaForwardImpl, DynamicSchedulerMatchesStatic) {
  SKIP_WITHOUT_GPU();
  ScopedEnv ctas("FLASHLAB_SM90_FWD_CTAS", "3");
  struct Case {
    int64_t batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
    bool causal, top_left;
    int64_t window_right;
  };
  const Case cases[] = {{2, 4, 2, 1023, 1023, 128, true, false, -1}, {3, 4, 1, 113, 700, 64, true, false, -1},
                        {2, 2, 2, 700, 113, 128, true, true, -1},    {1, 8, 8, 1, 515, 64, true, false, -1},
                        {2, 4, 4, 515, 515, 96, false, false, 40}};
  int ran = 0;
  for (const Case& c : cases) {
    ProblemSpec s;
    s.batch = c.batch;
    s.heads_q = c.heads_q;
    s.heads_kv = c.heads_kv;
    s.seqlen_q = c.seqlen_q;
    s.seqlen_k = c.seqlen_k;
    s.head_dim = c.head_dim;
    s.causal = c.causal;
    s.causal_align = c.top_left ? CausalAlign::kTopLeft : CausalAlign::kBottomRight;
    s.window_right = c.window_right;
    s.data_seed = 4100 + static_cast<uint64_t>(ran);
    Problem pb(s);
    DeviceProblem dev;
    const Status up = dev.init(&pb);
    ASSERT_TRUE(up.ok()) << up.to_string();
    Status st;
    {
      ScopedEnv dyn("FLASHLAB_SM90_FWD_DYNAMIC", "0");
      st = run_forward(dev, GetParam(), NAN);
    }
    if (not_built(st)) continue;
    ASSERT_TRUE(st.ok()) << pb.spec.describe() << ": " << st.to_string();
    const std::vector<unsigned char> out_static = pb.out.bytes;
    const std::vector<float> lse_static = pb.lse;
    {
      ScopedEnv dyn("FLASHLAB_SM90_FWD_DYNAMIC", "1");
      st = run_forward(dev, GetParam(), NAN);
    }
    ASSERT_TRUE(st.ok()) << pb.spec.describe() << ": " << st.to_string();
    ++ran;
    EXPECT_TRUE(out_static == pb.out.bytes) << pb.spec.describe() << ": the dynamic order changed out";
    EXPECT_EQ(std::memcmp(lse_static.data(), pb.lse.data(), lse_static.size() * sizeof(float)), 0)
        << pb.spec.describe();
    EXPECT_EQ(check_forward(pb.out, pb.lse, exact_forward(pb, NAN), pb.spec.dtype, lse_count(pb)), "")
        << pb.spec.describe();
    EXPECT_EQ(written_padding(pb.out), 0) << pb.spec.describe();

    // A workspace smaller than asked for: refused before anything runs.
    FwdParams p = dev.fwd_params(GetParam(), nullptr);
    int64_t need = 0;
    ASSERT_TRUE(flashlab::forward_workspace_size(p, &need).ok());
    if (need > 0) {
      ASSERT_TRUE(dev.poison_forward_outputs().ok());
      DeviceBuffer small;
      ASSERT_TRUE(small.allocate(static_cast<size_t>(need), "workspace").ok());
      p.workspace = small.get();
      p.workspace_bytes = need - 1;
      st = flashlab::attention_forward(p);
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
      EXPECT_NE(st.message().find("workspace"), std::string::npos) << st.message();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_TRUE(dev.download_forward_outputs().ok());
      for (unsigned char b : pb.out.bytes) ASSERT_EQ(b, 0xFF) << "out written by a refused call";
    }
  }
  if (ran == 0) GTEST_SKIP() << "no head dim of 64, 96, 128 built";
}

INSTANTIATE_TEST_SUITE_P(Impls, CudaForwardImpl, ::testing::ValuesIn(production_cuda_impls()),
                         impl_test_name);

// kAuto's choice on the GPU: cuda_sm90 on a compute-capability-9.0 device when it is built (the
// first row of the dispatch table), else cuda_sm80; what cuda_sm90 refuses (dropout, varlen, the
// backward) goes to cuda_sm80.
TEST(CudaForward, AutoPicks) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device: kAuto's choice not exercised";
  AttentionConfig c = sm80_config();
  c.impl = Impl::kAuto;
  Impl chosen = Impl::kAuto;
  const Status st = flashlab::resolve_impl(c, &chosen);
  if (not_built(st)) GTEST_SKIP() << st.message();
  ASSERT_TRUE(st.ok()) << st.to_string();
  int device = 0;
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaGetDeviceProperties(&prop, device), cudaSuccess);
  bool sm90_built = false;
  for (const auto& info : flashlab::list_implementations())
    if (info.impl == Impl::kCudaSm90) sm90_built = true;
  const bool hopper = prop.major == 9 && prop.minor == 0;
  EXPECT_EQ(chosen, hopper && sm90_built ? Impl::kCudaSm90 : Impl::kCudaSm80) << flashlab::to_string(chosen);
  c.dropout_p = 0.1f;  // cuda_sm90 leaves dropout to cuda_sm80
  ASSERT_TRUE(flashlab::resolve_impl(c, &chosen).ok());
  EXPECT_EQ(chosen, Impl::kCudaSm80) << flashlab::to_string(chosen);
  bool listed = false;
  for (const auto& info : flashlab::list_implementations())
    if (info.impl == Impl::kCudaSm80) listed = info.available && !info.experimental;
  EXPECT_TRUE(listed) << "cuda_sm80 is compiled in, verified, and a GPU is present";
}

// StreamingLLM sink tokens (docs/design/sink-tokens.md): cuda_sm80 has them on every GPU, cuda_sm90
// on Hopper GPUs (auto picks it there), forward and backward, deterministic too.
TEST(CudaForward, SinkTokensRouting) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device: the refusal comes after the device check";
  int device = 0;
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaGetDeviceProperties(&prop, device), cudaSuccess);
  const bool hopper = prop.major == 9 && prop.minor == 0;
  for (Impl impl : {Impl::kAuto, Impl::kCudaSm80, Impl::kCudaSm90}) {
    AttentionConfig c = sm80_config();
    c.impl = impl;
    c.window_left = 16;
    c.sink_tokens = 4;
    Impl chosen = Impl::kAuto;
    const Status st = flashlab::resolve_impl(c, &chosen);  // the forward's choice
    if (not_built(st)) continue;
    if (impl == Impl::kCudaSm90 && !hopper) {  // cuda_sm90 refuses the device first
      EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.to_string();
      continue;
    }
    ASSERT_TRUE(st.ok()) << flashlab::to_string(impl) << ": " << st.to_string();
    if (impl == Impl::kAuto) {  // cuda_sm90 on a Hopper GPU (if built), cuda_sm80 elsewhere
      if (!hopper) {
        EXPECT_EQ(chosen, Impl::kCudaSm80) << flashlab::to_string(chosen);
      }
    } else {
      EXPECT_EQ(chosen, impl) << flashlab::to_string(chosen);
    }
  }
  // Head dim 256: cuda_sm90's forward refuses sink tokens beside a left window (auto: cuda_sm80),
  // and takes them without one (they change no mask).
  if (!hopper) return;
  for (int64_t left : {int64_t(16), int64_t(-1)}) {
    AttentionConfig c = sm80_config();
    c.head_dim = 256;
    c.causal = true;
    c.window_left = left;
    c.sink_tokens = 4;
    c.impl = Impl::kCudaSm90;
    Impl chosen = Impl::kAuto;
    Status st = flashlab::resolve_impl(c, &chosen);
    if (not_built(st)) continue;
    if (left >= 0) {
      EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.to_string();
      EXPECT_NE(st.message().find("sink_tokens"), std::string::npos) << st.to_string();
    } else {
      EXPECT_TRUE(st.ok()) << st.to_string();
    }
    c.impl = Impl::kAuto;
    st = flashlab::resolve_impl(c, &chosen);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(chosen, left >= 0 ? Impl::kCudaSm80 : Impl::kCudaSm90) << "window_left " << left;
  }
}

#endif  // FLASHLAB_WITH_CUDA

}  // namespace
