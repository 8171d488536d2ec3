// src/cuda/common/kernel_args.cpp — the public FwdParams / BwdParams -> the kernels' arguments
// (kernel_args.h), once per call, for every CUDA implementation. Host code only.
#include "cuda/common/kernel_args.h"

#include <cstdint>
#include <string>

#include "cuda/common/bwd_workspace.h"
#include "flashlab/flashlab.h"
#include "flashlab/mask.h"
#include "flashlab/philox.h"

namespace flashlab {
namespace common {

namespace {

// A window of 2^32 keys reaches past every key of a sequence of <= 2^30 (the implementations'
// seqlen cap), so larger windows are clamped to it (equivalent, and i + shift ± window can no
// longer overflow int64).
constexpr int64_t kWindowCap = int64_t(1) << 32;

int64_t cap_window(int64_t w) {
  return w > kWindowCap ? kWindowCap : w;
}

}  // namespace

FwdArguments make_fwd_arguments(const FwdParams& p) {
  FwdArguments k;
  k.seq.batch = static_cast<int>(p.batch);
  k.seq.heads_q = static_cast<int>(p.heads_q);
  k.seq.seqlen_q = static_cast<int>(p.seqlen_q);
  k.seq.seqlen_k = static_cast<int>(p.seqlen_k);
  k.seq.cu_seqlens_q = p.cu_seqlens_q;
  k.seq.cu_seqlens_k = p.cu_seqlens_k;

  FwdInputArgs& m = k.in;
  m.q = p.q.ptr;
  m.k = p.k.ptr;
  m.v = p.v.ptr;
  m.q_batch_stride = p.q.batch_stride;
  m.q_row_stride = p.q.row_stride;
  m.q_head_stride = p.q.head_stride;
  m.k_batch_stride = p.k.batch_stride;
  m.k_row_stride = p.k.row_stride;
  m.k_head_stride = p.k.head_stride;
  m.v_batch_stride = p.v.batch_stride;
  m.v_row_stride = p.v.row_stride;
  m.v_head_stride = p.v.head_stride;
  m.head_dim = static_cast<int>(p.head_dim);
  m.kv_group = static_cast<int>(p.heads_q / p.heads_kv);
  m.total_q = p.total_q;
  m.total_k = p.total_k;

  // The interval mask exactly as every backend builds it: causal becomes window_right = 0.
  const RowMask row_mask = make_row_mask(p, p.seqlen_q, p.seqlen_k);
  ScoreArgs& s = k.score;
  s.softmax_scale = p.softmax_scale;
  s.softcap = p.softcap;
  s.alibi_slopes = p.alibi_slopes;
  s.alibi_batch_stride = p.alibi_batch_stride;
  s.sink_logits = p.sink_logits;
  s.bottom_right = p.causal_align == CausalAlign::kBottomRight;
  s.window_left = cap_window(row_mask.left);
  s.window_right = cap_window(row_mask.right);
  s.sink_tokens = static_cast<int32_t>(row_mask.sink < INT32_MAX ? row_mask.sink : INT32_MAX);

  k.dropout_enabled = p.dropout_p > 0.0f;
  k.dropout.seed = p.dropout_seed;
  k.dropout.offset = p.dropout_offset;
  k.dropout.threshold = dropout_threshold(p.dropout_p);
  k.dropout.keep_scale = k.dropout_enabled ? static_cast<float>(1.0 / (1.0 - double(p.dropout_p))) : 1.0f;

  FwdOutputArgs& e = k.out;
  e.o = p.out.ptr;
  e.o_batch_stride = p.out.batch_stride;
  e.o_row_stride = p.out.row_stride;
  e.o_head_stride = p.out.head_stride;
  e.lse = p.lse;
  e.lse_batch_stride = p.lse_batch_stride;
  e.lse_head_stride = p.lse_head_stride;
  e.head_dim = static_cast<int>(p.head_dim);
  return k;
}

// The forward's translation gives the shared pieces (sequence, score, dropout); the rest is the
// backward's.
BwdArguments make_bwd_arguments(const BwdParams& p, char* ws) {
  FwdParams f;
  static_cast<AttentionConfig&>(f) = p;
  f.q = p.q;
  f.k = p.k;
  f.v = p.v;
  const FwdArguments fk = make_fwd_arguments(f);
  BwdArguments k;
  k.seq = fk.seq;
  k.score = fk.score;
  k.dropout = fk.dropout;
  k.dropout_enabled = fk.dropout_enabled;
  k.deterministic = p.deterministic;

  BwdInputArgs& in = k.in;
  in.q = p.q.ptr;
  in.k = p.k.ptr;
  in.v = p.v.ptr;
  in.out = p.out.ptr;
  in.dout = p.dout.ptr;
  in.q_batch_stride = p.q.batch_stride;
  in.q_row_stride = p.q.row_stride;
  in.q_head_stride = p.q.head_stride;
  in.k_batch_stride = p.k.batch_stride;
  in.k_row_stride = p.k.row_stride;
  in.k_head_stride = p.k.head_stride;
  in.v_batch_stride = p.v.batch_stride;
  in.v_row_stride = p.v.row_stride;
  in.v_head_stride = p.v.head_stride;
  in.o_batch_stride = p.out.batch_stride;
  in.o_row_stride = p.out.row_stride;
  in.o_head_stride = p.out.head_stride;
  in.do_batch_stride = p.dout.batch_stride;
  in.do_row_stride = p.dout.row_stride;
  in.do_head_stride = p.dout.head_stride;
  in.head_dim = static_cast<int>(p.head_dim);
  in.kv_group = static_cast<int>(p.heads_q / p.heads_kv);
  in.total_q = p.total_q;
  in.total_k = p.total_k;

  const BwdWorkspaceLayout w = bwd_workspace_layout(p.batch, p.seqlen_q, p.seqlen_k, p.heads_q, p.heads_kv,
                                                    p.head_dim, p.deterministic);
  auto section = [&](int64_t offset) { return offset < 0 ? nullptr : reinterpret_cast<float*>(ws + offset); };
  BwdRowArgs& r = k.rows;
  r.lse = p.lse;
  r.lse_batch_stride = p.lse_batch_stride;
  r.lse_head_stride = p.lse_head_stride;
  r.dsum = section(w.dsum);
  r.row_stats = section(w.row_stats);
  r.rows_q = p.batch * p.seqlen_q;
  if (p.sink_logits != nullptr && p.dsink != nullptr) {
    r.dsink_partial = section(w.dsink_part);
    r.dsink = p.dsink;
  }

  BwdGradArgs& g = k.grad;
  g.dq = p.dq.ptr;
  g.dq_batch_stride = p.dq.batch_stride;
  g.dq_row_stride = p.dq.row_stride;
  g.dq_head_stride = p.dq.head_stride;
  g.dq_accum = section(w.dq_accum);
  g.dq_semaphore = w.dq_sem < 0 ? nullptr : reinterpret_cast<int*>(ws + w.dq_sem);
  g.dk = p.dk.ptr;
  g.dv = p.dv.ptr;
  g.dk_batch_stride = p.dk.batch_stride;
  g.dk_row_stride = p.dk.row_stride;
  g.dk_head_stride = p.dk.head_stride;
  g.dv_batch_stride = p.dv.batch_stride;
  g.dv_row_stride = p.dv.row_stride;
  g.dv_head_stride = p.dv.head_stride;
  g.dkv_mode = p.heads_q == p.heads_kv ? DkvMode::kDirect
               : p.deterministic       ? DkvMode::kPartial
                                       : DkvMode::kAtomic;
  g.dk_accum = section(w.dk_accum);
  g.dv_accum = section(w.dv_accum);
  g.heads_acc = static_cast<int>(p.deterministic ? p.heads_q : p.heads_kv);
  g.heads_kv = static_cast<int>(p.heads_kv);
  g.rows_k = p.batch * p.seqlen_k;
  return k;
}

int64_t bwd_workspace_bytes(const BwdParams& p) {
  return bwd_workspace_layout(p.batch, p.seqlen_q, p.seqlen_k, p.heads_q, p.heads_kv, p.head_dim, p.deterministic)
      .bytes;
}

Status check_bwd_lse_and_workspace(const BwdParams& p, const char* impl) {
  const std::string name = std::string("impl ") + impl;
  if (p.lse == nullptr) return Status::Invalid("lse is null: " + name + "'s backward needs the forward's LSE");
  const int64_t need = bwd_workspace_bytes(p);
  if (p.workspace_bytes < need)
    return Status::Invalid("workspace_bytes (" + std::to_string(p.workspace_bytes) + ") is too small for " + name +
                           "'s backward: it needs " + std::to_string(need) +
                           " bytes (backward_workspace_size() returns it)");
  if (need > 0 && p.workspace == nullptr)
    return Status::Invalid("workspace is null: " + name + "'s backward needs " + std::to_string(need) +
                           " bytes of device workspace (backward_workspace_size() returns it)");
  if (reinterpret_cast<uintptr_t>(p.workspace) % 16 != 0)
    return Status::Invalid("workspace must be 16-byte aligned for " + name + " (cudaMalloc memory is)");
  return Status::Ok();
}

}  // namespace common
}  // namespace flashlab
