// learn/api_backward.cu — the one dispatcher of the backward learning kernels (Impl::kLearnV0..V4).
//
//   v0  backward_v0.cu  standard attention: cuBLAS products + elementwise kernels, O(seqlen²) scratch
//   v1  backward_v1.cu  FlashAttention-1 Algorithm 2: scalar tiles, key blocks outer, dQ read-modify-write
//   v2  backward_v2.cu  FlashAttention-2 partition: block per key block, precomputed D, dQ atomics
//   v3  backward_v3.cu  tensor cores: mma.sync m16n8k16 + ldmatrix (.trans), Pᵀ/dSᵀ kept in registers
//   v4  backward_v4.cu  pipelined: cp.async double buffering, swizzled smem, causal skipping
//
// The dispatcher (src/api) has already validated the params and called learn_supports()
// (learn/api_forward.cu). We re-check the few limits every version relies on, so the harness
// (learn/attention_backward.cu), which calls us directly, gets a Status instead of garbage.
#include <string>

#include "api/backend.h"
#include "api/validate.h"
#include "kernels/backward_common.cuh"

namespace flashlab {
namespace learn_bwd {

// Tile rows of the query blocks (dq_turn granularity) of the FA-style versions.
constexpr int kQueryBlock[5] = {0, 0, 32, 64, 64};

int64_t v0_scratch_bytes(const BwdParams& p);  // backward_v0.cu

int64_t extra_memory_bytes(int version, const BwdParams& p) {
  if (version == 0) return v0_scratch_bytes(p);
  if (version < 0 || version > 4) return 0;
  return workspace_bytes(p, version >= 2 && p.deterministic ? kQueryBlock[version] : 0);
}

// No keys: every query row sees nothing, so dq = 0 (dk, dv are empty): the zeroed accumulator,
// postprocessed, and no main kernel.
Status backward_no_keys(const BwdParams& p) {
  return run_with_workspace(p, /*turn_block_m=*/0, Prologue::kZeroDqAcc,
                            [](const BwdArgs&, cudaStream_t) { return Status::Ok(); });
}

namespace {
Status check_limits(int version, const BwdParams& p) {
  const std::string who = "learn_v" + std::to_string(version) + " backward: ";
  if (version < 0 || version > 4) return Status::Invalid("learn backward: version " + std::to_string(version) + " (0..4)");
  if (p.dtype != DType::kBFloat16 && p.dtype != DType::kFloat16)
    return Status::Unsupported(who + "dtype " + to_string(p.dtype) + " (supported: bf16, fp16)");
  if (p.head_dim != 64 && p.head_dim != 128)
    return Status::Unsupported(who + "head_dim " + std::to_string(p.head_dim) + " (supported: 64, 128)");
  if (p.dropout_p > 0) return Status::Unsupported(who + "dropout");
  if (p.softcap > 0) return Status::Unsupported(who + "softcap");
  if (p.alibi_slopes != nullptr) return Status::Unsupported(who + "ALiBi");
  if (p.window_left >= 0 || (!p.causal && p.window_right >= 0)) return Status::Unsupported(who + "sliding window");
  if (p.cu_seqlens_q != nullptr || p.cu_seqlens_k != nullptr) return Status::Unsupported(who + "varlen");
  // Top-left and bottom-right coincide when seqlen_q == seqlen_k (learn_supports allows that).
  if (p.causal && p.causal_align != CausalAlign::kBottomRight && p.seqlen_q != p.seqlen_k)
    return Status::Unsupported(who + "top-left causal alignment with seqlen_q != seqlen_k");
  if (p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0)
    return Status::Invalid(who + "heads_q must be a multiple of heads_kv");
  if (p.seqlen_q >= (1 << 30) || p.seqlen_k >= (1 << 30)) return Status::Unsupported(who + "seqlen >= 2^30");
  if (p.batch * p.heads_q > 65535 * 65535ll || p.batch > 65535 || p.heads_kv > 65535)
    return Status::Unsupported(who + "batch or heads above the grid limits (65535)");
  return Status::Ok();
}
}  // namespace

}  // namespace learn_bwd

namespace detail {

Status learn_backward(int version, const BwdParams& p) {
  FLASHLAB_RETURN_IF_ERROR(learn_bwd::check_limits(version, p));
  if (p.batch == 0 || p.seqlen_q == 0 || p.heads_q == 0) return Status::Ok();  // nothing to compute
  // v3 and v4 move 16 bytes (8 elements) per load: pointers and strides must allow it.
  if (version >= 3) FLASHLAB_RETURN_IF_ERROR(check_alignment_bwd(p, 16, ("learn_v" + std::to_string(version)).c_str()));
  if (p.seqlen_k == 0) return learn_bwd::backward_no_keys(p);
  switch (version) {
    case 0: return learn_bwd::backward_v0(p);
    case 1: return learn_bwd::backward_v1(p);
    case 2: return learn_bwd::backward_v2(p);
    case 3: return learn_bwd::backward_v3(p);
    case 4: return learn_bwd::backward_v4(p);
  }
  return Status(StatusCode::kInternal, "learn backward: unreachable version");
}

}  // namespace detail
}  // namespace flashlab
