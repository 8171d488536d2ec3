// Every error path of the public API: the call returns a Status naming the argument and the rule,
// and writes nothing (outputs keep their poison pattern).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "flashlab/flashlab.h"
#include "testing/problem.h"

using namespace flashlab;
using flashlab::testing::Problem;
using flashlab::testing::ProblemSpec;

namespace {

ProblemSpec small_spec() {
  ProblemSpec s;
  s.batch = 2;
  s.seqlen_q = 9;
  s.seqlen_k = 13;
  s.heads_q = 4;
  s.heads_kv = 2;
  s.head_dim = 16;
  s.dtype = DType::kFloat32;
  return s;
}

// Runs the forward with a mutation applied and checks: error, code, message fragment, no writes.
template <typename Mutate>
void expect_fwd_error(Mutate mutate, StatusCode code, const std::string& fragment) {
  Problem pb(small_spec());
  pb.poison_forward_outputs();
  const auto out_before = pb.out.bytes;
  const auto lse_before = pb.lse;
  FwdParams p = pb.fwd_params(Impl::kReference);
  mutate(p, pb);
  Status st = attention_forward(p);
  ASSERT_FALSE(st.ok()) << "expected an error containing '" << fragment << "'";
  EXPECT_EQ(st.code(), code) << st.to_string();
  EXPECT_NE(st.message().find(fragment), std::string::npos) << "message: " << st.message();
  EXPECT_EQ(std::memcmp(out_before.data(), pb.out.bytes.data(), out_before.size()), 0) << "out was written";
  EXPECT_EQ(std::memcmp(lse_before.data(), pb.lse.data(), lse_before.size() * 4), 0) << "lse was written";
  // validate_forward agrees with attention_forward.
  Status v = validate_forward(p);
  EXPECT_EQ(v.code(), st.code());
}

template <typename Mutate>
void expect_bwd_error(Mutate mutate, StatusCode code, const std::string& fragment) {
  Problem pb(small_spec());
  pb.poison_backward_outputs();
  const auto dq_before = pb.dq.bytes, dk_before = pb.dk.bytes, dv_before = pb.dv.bytes;
  BwdParams p = pb.bwd_params(Impl::kReference);
  mutate(p, pb);
  Status st = attention_backward(p);
  ASSERT_FALSE(st.ok()) << "expected an error containing '" << fragment << "'";
  EXPECT_EQ(st.code(), code) << st.to_string();
  EXPECT_NE(st.message().find(fragment), std::string::npos) << "message: " << st.message();
  EXPECT_EQ(dq_before, pb.dq.bytes);
  EXPECT_EQ(dk_before, pb.dk.bytes);
  EXPECT_EQ(dv_before, pb.dv.bytes);
}

constexpr auto kInvalid = StatusCode::kInvalidArgument;
constexpr auto kUnsupported = StatusCode::kUnsupported;

}  // namespace

TEST(ApiErrors, Sizes) {
  expect_fwd_error([](FwdParams& p, Problem&) { p.batch = 0; }, kInvalid, "batch (0) must be positive");
  expect_fwd_error([](FwdParams& p, Problem&) { p.batch = -3; }, kInvalid, "batch (-3)");
  expect_fwd_error([](FwdParams& p, Problem&) { p.seqlen_q = 0; }, kInvalid, "seqlen_q (0) must be >= 1");
  expect_fwd_error([](FwdParams& p, Problem&) { p.seqlen_k = -1; }, kInvalid, "seqlen_k (-1)");
  expect_fwd_error([](FwdParams& p, Problem&) { p.heads_q = 0; }, kInvalid, "heads_q (0) must be positive");
  expect_fwd_error([](FwdParams& p, Problem&) { p.heads_kv = 0; }, kInvalid, "heads_kv (0) must be positive");
  expect_fwd_error([](FwdParams& p, Problem&) { p.heads_q = 12; p.heads_kv = 5; }, kInvalid,
                   "heads_q (12) must be a multiple of heads_kv (5)");
  expect_fwd_error([](FwdParams& p, Problem&) { p.head_dim = 0; }, kInvalid, "head_dim (0) must be positive");
}

TEST(ApiErrors, HeadDimTooLargeForCpu) {
  ProblemSpec s = small_spec();
  s.head_dim = 520;
  Problem pb(s);
  pb.poison_forward_outputs();
  const auto before = pb.out.bytes;
  Status st = attention_forward(pb.fwd_params(Impl::kCpuFlash));
  EXPECT_EQ(st.code(), kUnsupported);
  EXPECT_EQ(st.message(), "head_dim (520) is not supported by impl cpu_flash: supported 1..512");
  EXPECT_EQ(before, pb.out.bytes);
}

TEST(ApiErrors, Overflow) {
  expect_fwd_error([](FwdParams& p, Problem&) { p.seqlen_q = int64_t(1) << 40; p.seqlen_k = int64_t(1) << 40; },
                   kInvalid, "overflows int64");
  expect_fwd_error([](FwdParams& p, Problem&) { p.q.batch_stride = std::numeric_limits<int64_t>::max() / 2; },
                   kInvalid, "q: the");
  expect_fwd_error([](FwdParams& p, Problem&) { p.out.row_stride = std::numeric_limits<int64_t>::max() / 4; },
                   kInvalid, "overflows int64");
}

TEST(ApiErrors, Scalars) {
  expect_fwd_error([](FwdParams& p, Problem&) { p.dtype = DType::kFloat8E4M3; }, kUnsupported, "fp8_e4m3 is reserved");
  expect_fwd_error([](FwdParams& p, Problem&) { p.dtype = static_cast<DType>(42); }, kInvalid, "is not a DType");
  expect_fwd_error([](FwdParams& p, Problem&) { p.device = static_cast<Device>(7); }, kInvalid, "is not a Device");
  expect_fwd_error([](FwdParams& p, Problem&) { p.softmax_scale = std::numeric_limits<float>::infinity(); },
                   kInvalid, "softmax_scale must be finite");
  expect_fwd_error([](FwdParams& p, Problem&) { p.softcap = -1.0f; }, kInvalid, "softcap (-1)");
  expect_fwd_error([](FwdParams& p, Problem&) { p.softcap = std::nanf(""); }, kInvalid, "softcap");
  expect_fwd_error([](FwdParams& p, Problem&) { p.window_left = -2; }, kInvalid, "window_left (-2) must be >= -1");
  expect_fwd_error([](FwdParams& p, Problem&) { p.window_right = -5; }, kInvalid, "window_right (-5)");
  expect_fwd_error([](FwdParams& p, Problem&) { p.dropout_p = 1.0f; }, kInvalid, "dropout_p (1) must be in [0, 1)");
  expect_fwd_error([](FwdParams& p, Problem&) { p.dropout_p = -0.1f; }, kInvalid, "dropout_p (-0.1)");
  expect_fwd_error([](FwdParams& p, Problem&) { p.dropout_p = std::nanf(""); }, kInvalid, "dropout_p");
  expect_fwd_error([](FwdParams& p, Problem&) { p.causal_align = static_cast<CausalAlign>(3); }, kInvalid,
                   "is not a CausalAlign");
  expect_fwd_error([](FwdParams& p, Problem&) { p.num_threads = -1; }, kInvalid, "num_threads (-1)");
  expect_fwd_error([](FwdParams& p, Problem&) { p.alibi_batch_stride = -4; }, kInvalid, "alibi_batch_stride (-4)");
}

TEST(ApiErrors, Pointers) {
  expect_fwd_error([](FwdParams& p, Problem&) { p.q.ptr = nullptr; }, kInvalid, "q is null");
  expect_fwd_error([](FwdParams& p, Problem&) { p.k.ptr = nullptr; }, kInvalid, "k is null");
  expect_fwd_error([](FwdParams& p, Problem&) { p.v.ptr = nullptr; }, kInvalid, "v is null");
  expect_fwd_error([](FwdParams& p, Problem&) { p.out.ptr = nullptr; }, kInvalid, "out is null");
  expect_bwd_error([](BwdParams& p, Problem&) { p.lse = nullptr; }, kInvalid, "lse is null");
  expect_bwd_error([](BwdParams& p, Problem&) { p.dout.ptr = nullptr; }, kInvalid, "dout is null");
  expect_bwd_error([](BwdParams& p, Problem&) { p.dq.ptr = nullptr; }, kInvalid, "dq is null");
  expect_bwd_error([](BwdParams& p, Problem&) { p.dk.ptr = nullptr; }, kInvalid, "dk is null");
  expect_bwd_error([](BwdParams& p, Problem&) { p.dv.ptr = nullptr; }, kInvalid, "dv is null");
  expect_bwd_error([](BwdParams& p, Problem&) { p.out.ptr = nullptr; }, kInvalid, "out is null");
  expect_bwd_error([](BwdParams& p, Problem&) { p.dk = p.dv; }, kInvalid, "dk and dv must not be the same buffer");
  expect_bwd_error([](BwdParams& p, Problem&) { p.batch = 0; }, kInvalid, "batch (0)");
}

TEST(ApiErrors, Sinks) {
  static const float bad[4] = {0.0f, std::numeric_limits<float>::quiet_NaN(), 0.0f, 0.0f};
  static const float plus_inf[4] = {0.0f, 0.0f, 0.0f, std::numeric_limits<float>::infinity()};
  expect_fwd_error([](FwdParams& p, Problem&) { p.sink_logits = bad; }, kInvalid, "sink_logits[1] (nan) must be finite or -inf");
  expect_fwd_error([](FwdParams& p, Problem&) { p.sink_logits = plus_inf; }, kInvalid, "sink_logits[3] (inf)");
  expect_bwd_error([](BwdParams& p, Problem&) { p.sink_logits = bad; }, kInvalid, "sink_logits[1]");
  static float dsink[4];
  expect_bwd_error([](BwdParams& p, Problem&) { p.dsink = dsink; }, kInvalid,
                   "dsink is set but sink_logits is null");
  // -inf turns a head's sink off; dsink is optional.
  ProblemSpec s = small_spec();
  s.sinks = true;
  Problem pb(s);
  pb.sink_logits[2] = -std::numeric_limits<float>::infinity();
  for (Impl impl : {Impl::kReference, Impl::kCpuFlash}) {
    ASSERT_TRUE(attention_forward(pb.fwd_params(impl)).ok());
    BwdParams b = pb.bwd_params(impl);
    EXPECT_TRUE(attention_backward(b).ok());
    EXPECT_EQ(pb.dsink[2], 0.0f) << "a sink of -inf has no gradient";
    b.dsink = nullptr;
    EXPECT_TRUE(attention_backward(b).ok());
  }
}

// StreamingLLM sink tokens (docs/design/sink-tokens.md): the CPU backends have them (the CUDA
// ones refuse: tests/gpu); impl auto on the CPU runs cpu_flash.
TEST(ApiErrors, SinkTokens) {
  expect_fwd_error([](FwdParams& p, Problem&) { p.sink_tokens = -1; }, kInvalid, "sink_tokens (-1) must be >= 0");
  expect_bwd_error([](BwdParams& p, Problem&) { p.sink_tokens = -1; }, kInvalid, "sink_tokens (-1) must be >= 0");
  Problem pb(small_spec());
  for (Impl impl : {Impl::kAuto, Impl::kCpuFlash, Impl::kReference}) {
    FwdParams f = pb.fwd_params(impl);
    f.sink_tokens = 2;
    f.window_left = 1;
    EXPECT_TRUE(attention_forward(f).ok()) << to_string(impl) << ": " << attention_forward(f).to_string();
    BwdParams b = pb.bwd_params(impl);
    b.sink_tokens = 2;
    b.window_left = 1;
    EXPECT_TRUE(attention_backward(b).ok()) << to_string(impl) << ": " << attention_backward(b).to_string();
  }
  FwdParams f = pb.fwd_params(Impl::kAuto);
  f.sink_tokens = 2;
  Impl chosen = Impl::kAuto;
  ASSERT_TRUE(resolve_impl(f, &chosen).ok());
  EXPECT_EQ(chosen, Impl::kCpuFlash);
}

TEST(ApiErrors, Alignment) {
  expect_fwd_error([](FwdParams& p, Problem&) { p.q.ptr = static_cast<const char*>(p.q.ptr) + 2; }, kInvalid,
                   "q is not aligned to its element size (4 bytes)");
  expect_bwd_error([](BwdParams& p, Problem&) { p.dv.ptr = static_cast<char*>(p.dv.ptr) + 1; }, kInvalid,
                   "dv is not aligned");
  expect_fwd_error([](FwdParams& p, Problem&) { p.lse = reinterpret_cast<float*>(reinterpret_cast<char*>(p.lse) + 2); },
                   kInvalid, "lse is not aligned");
}

TEST(ApiErrors, Strides) {
  expect_fwd_error([](FwdParams& p, Problem&) { p.q.dim_stride = 2; }, kInvalid, "q.dim_stride (2) must be 1");
  expect_fwd_error([](FwdParams& p, Problem&) { p.out.dim_stride = 0; }, kInvalid, "out.dim_stride (0)");
  expect_fwd_error([](FwdParams& p, Problem&) { p.k.row_stride = -16; }, kInvalid, "must be non-negative");
  // Output rows that overlap: head stride smaller than head_dim.
  expect_fwd_error([](FwdParams& p, Problem&) { p.out.head_stride = 8; }, kInvalid, "make output elements overlap");
  expect_fwd_error([](FwdParams& p, Problem&) { p.out.batch_stride = 0; }, kInvalid, "overlap");
  expect_fwd_error([](FwdParams& p, Problem&) { p.lse_head_stride = 1; }, kInvalid, "lse strides");
  expect_bwd_error([](BwdParams& p, Problem&) { p.dq.row_stride = 1; }, kInvalid, "dq strides");
}

TEST(ApiErrors, Varlen) {
  ProblemSpec s = small_spec();
  s.lens_q = {3, 0, 5};
  s.lens_k = {4, 2, 0};
  Problem pb(s);
  pb.poison_forward_outputs();
  const auto before = pb.out.bytes;
  {
    FwdParams p = pb.fwd_params(Impl::kReference);
    p.cu_seqlens_k = nullptr;
    Status st = attention_forward(p);
    EXPECT_EQ(st.code(), kInvalid);
    EXPECT_NE(st.message().find("cu_seqlens_q and cu_seqlens_k must both be set"), std::string::npos) << st.message();
  }
  {
    std::vector<int32_t> bad = {0, 4, 2, 6};
    FwdParams p = pb.fwd_params(Impl::kReference);
    p.cu_seqlens_q = bad.data();
    Status st = attention_forward(p);
    EXPECT_EQ(st.code(), kInvalid);
    EXPECT_NE(st.message().find("cu_seqlens_q must be non-decreasing"), std::string::npos) << st.message();
  }
  {
    FwdParams p = pb.fwd_params(Impl::kReference);
    p.seqlen_q = 4;  // the longest query sequence has 5 tokens
    Status st = attention_forward(p);
    EXPECT_EQ(st.code(), kInvalid);
    EXPECT_NE(st.message().find("sequence 2 has length 5 (from cu_seqlens_q) > seqlen_q (4)"), std::string::npos)
        << st.message();
  }
  {  // total_q / total_k: the packed row counts (cuda_sm90's TMA descriptors span them)
    FwdParams p = pb.fwd_params(Impl::kReference);
    EXPECT_EQ(p.total_q, 8);  // Problem passes them: 3 + 0 + 5 rows
    p.total_k = 5;            // cu_seqlens_k ends at 6
    Status st = attention_forward(p);
    EXPECT_EQ(st.code(), kInvalid);
    EXPECT_NE(st.message().find("cu_seqlens_k[3] (6) > total_k (5): the packed tensors have fewer rows"),
              std::string::npos)
        << st.message();
    p = pb.fwd_params(Impl::kReference);
    p.total_q = -2;
    st = attention_forward(p);
    EXPECT_EQ(st.code(), kInvalid);
    EXPECT_NE(st.message().find("total_q (-2) must be >= 0, or -1 (not given)"), std::string::npos) << st.message();
  }
  EXPECT_EQ(before, pb.out.bytes);
}

TEST(ApiErrors, ImplAndDevice) {
  // Not compiled in (no 90a), or compiled in and refusing this CPU call ("no CUDA device is
  // available", or the device of the tensors): kUnsupported naming it either way.
  expect_fwd_error([](FwdParams& p, Problem&) { p.impl = Impl::kCudaSm90; }, kUnsupported, "impl cuda_sm90");
#if !defined(FLASHLAB_WITH_CUDA)
  expect_fwd_error([](FwdParams& p, Problem&) { p.device = Device::kCUDA; }, kUnsupported, "no CUDA support");
  expect_fwd_error([](FwdParams& p, Problem&) { p.impl = Impl::kLearnV4; }, kUnsupported, "not compiled into this build");
#endif
  Impl impl;
  Status st = parse_impl("flash9000", &impl);
  EXPECT_EQ(st.code(), kInvalid);
  EXPECT_NE(st.message().find("impl 'flash9000' is unknown"), std::string::npos);
  DType dt;
  EXPECT_EQ(parse_dtype("int8", &dt).code(), kInvalid);
  ASSERT_TRUE(parse_dtype("bf16", &dt).ok());
  EXPECT_EQ(dt, DType::kBFloat16);
  ASSERT_TRUE(parse_impl("cpu_flash", &impl).ok());
  EXPECT_EQ(impl, Impl::kCpuFlash);
}

TEST(ApiErrors, StatusFormatting) {
  Status st = Status::Invalid("heads_q (12) must be a multiple of heads_kv (5)");
  EXPECT_EQ(st.to_string(), "invalid_argument: heads_q (12) must be a multiple of heads_kv (5)");
  EXPECT_TRUE(Status::Ok().ok());
  EXPECT_EQ(Status::Ok().to_string(), "ok");
}

TEST(Api, ValidCallsResolve) {
  Problem pb(small_spec());
  FwdParams p = pb.fwd_params(Impl::kAuto);
  Impl impl;
  ASSERT_TRUE(resolve_impl(p, &impl).ok());
  EXPECT_EQ(impl, Impl::kCpuFlash);  // the fastest CPU implementation
  EXPECT_TRUE(validate_forward(p).ok());
  EXPECT_TRUE(validate_backward(pb.bwd_params(Impl::kReference)).ok());
  // Empty sequences in a variable-length batch are valid.
  ProblemSpec s = small_spec();
  s.lens_q = {0, 0};
  s.lens_k = {0, 3};
  Problem v(s);
  EXPECT_TRUE(validate_forward(v.fwd_params(Impl::kReference)).ok()) << validate_forward(v.fwd_params(Impl::kReference)).to_string();
  bool has_ref = false, has_flash = false;
  for (const ImplInfo& i : list_implementations()) {
    has_ref |= i.impl == Impl::kReference && i.available;
    has_flash |= i.impl == Impl::kCpuFlash && i.available;
  }
  EXPECT_TRUE(has_ref);
  EXPECT_TRUE(has_flash);
}

TEST(Api, Flops) {
  ProblemSpec s = small_spec();
  s.seqlen_q = s.seqlen_k = 8;
  s.heads_q = s.heads_kv = 1;
  s.batch = 1;
  Problem full(s);
  AttentionFlops f = full.flops();
  EXPECT_EQ(f.visible_pairs, 64);
  EXPECT_DOUBLE_EQ(f.forward, 4.0 * 16 * 64);
  EXPECT_DOUBLE_EQ(f.backward, 2.5 * f.forward);
  s.causal = true;
  Problem causal(s);
  EXPECT_EQ(causal.flops().visible_pairs, 36);  // 8 * 9 / 2
  s.window_left = 1;  // each row sees itself and one key to the left (the first row only itself)
  Problem win(s);
  EXPECT_EQ(win.flops().visible_pairs, 15);
}

TEST(Api, FlopsCountSinkTokens) {
  ProblemSpec s = small_spec();
  s.seqlen_q = s.seqlen_k = 8;
  s.heads_q = s.heads_kv = 1;
  s.batch = 1;
  s.causal = true;
  s.window_left = 1;
  Problem pb(s);
  FwdParams p = pb.fwd_params(Impl::kReference);
  p.sink_tokens = 1;  // rows 2..7 also see key 0, left of their window: 15 + 6 pairs
  EXPECT_EQ(attention_flops(p).visible_pairs, 21);
}
