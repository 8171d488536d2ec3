// src/cuda/common/kernel_args.h — what every CUDA implementation is told about one call: plain,
// architecture-neutral structs, one per kernel piece.
//
// The public flashlab::FwdParams / BwdParams are translated once per call (kernel_args.cpp:
// make_fwd_arguments / make_bwd_arguments) into FwdArguments / BwdArguments. Each kernel piece
// (tile scheduler, mainloop, score variant, dropout, epilogue) takes its own member as its host
// `Arguments` and turns it into its device `Params` with `to_params()`: on sm80 the two are the
// same struct; on sm90 a mainloop's Params will add TMA descriptors built from the same Arguments.
// No CuTe here, so host-only files include it without compiling a kernel. Strides are in elements
// and int64 (a head_stride of a large packed batch overflows int32); sequence positions are int
// (each implementation's supports() caps seqlen at 2^30).
#pragma once

#include <cstdint>

#include "flashlab/dtype.h"
#include "flashlab/status.h"

namespace flashlab {
struct FwdParams;
struct BwdParams;

namespace common {

// Which (batch, head, query rows) a CTA owns and how long its sequences are (tile_scheduler.h).
struct SeqArgs {
  int batch = 0;
  int heads_q = 0;
  int seqlen_q = 0;  // fixed-length batches: every sequence; with cu_seqlens: the maximum
  int seqlen_k = 0;
  const int32_t* cu_seqlens_q = nullptr;  // device, batch + 1 prefix sums; null: fixed lengths
  const int32_t* cu_seqlens_k = nullptr;
};

// The forward's global-memory inputs (the mainloop's). Rows of sequence b start at row
// cu_seqlens[b] of the packed tensor (varlen) or at b * batch_stride (fixed lengths).
struct FwdInputArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  int64_t q_batch_stride = 0, q_row_stride = 0, q_head_stride = 0;
  int64_t k_batch_stride = 0, k_row_stride = 0, k_head_stride = 0;
  int64_t v_batch_stride = 0, v_row_stride = 0, v_head_stride = 0;
  int head_dim = 0;  // the caller's head_dim: a multiple of 8, <= the instantiation's kHeadDim
  int kv_group = 1;  // heads_q / heads_kv: query head h reads kv head h / kv_group (GQA, MQA)
  // Varlen: rows of the packed q and of the packed k, v (AttentionConfig::total_q / total_k; -1:
  // not given). cuda_sm90's TMA descriptors span them; cuda_sm80 does not read them.
  int64_t total_q = -1, total_k = -1;
};

// Score modification and mask (variant.h): s = scale·q·k, then softcap, then ALiBi, then the
// interval mask of flashlab/mask.h. `window_left` / `window_right` come from make_row_mask(), so
// causal is already folded in (right = 0) exactly as every other backend does it.
struct ScoreArgs {
  float softmax_scale = 0.0f;
  float softcap = 0.0f;                 // 0: off
  const float* alibi_slopes = nullptr;  // null: off; slope of (b, h) at b * batch_stride + h
  int64_t alibi_batch_stride = 0;
  bool bottom_right = true;   // CausalAlign::kBottomRight: shift = seqlen_k - seqlen_q
  // StreamingLLM sink tokens (flashlab/mask.h, sink_keys): the first sink_tokens keys stay visible
  // left of a row's window; 0 = off. cuda_sm80's and cuda_sm90's kernels read it (api_sm90.cpp
  // refuses the forward's beside a left window above head dim 192). 32 bits, in the padding after
  // bottom_right: the struct keeps its size, so every other kernel's parameters keep their offsets
  // (and its SASS).
  int32_t sink_tokens = 0;
  int64_t window_left = -1;   // keys visible left of the diagonal; -1 = unbounded
  int64_t window_right = -1;  // keys visible right of the diagonal; -1 = unbounded
  // Attention sinks: (heads_q) logits in natural-log units, in every row's softmax denominator
  // with no value (docs/api.md); -inf turns a head's sink off; null: none.
  const float* sink_logits = nullptr;
};

// Dropout on P (dropout.h): the keep-mask of flashlab/philox.h, keyed per (batch, head, row, col).
struct DropoutArgs {
  uint64_t seed = 0;
  uint64_t offset = 0;
  uint32_t threshold = 0;   // dropout_threshold(p): keep iff the Philox word >= threshold
  float keep_scale = 1.0f;  // 1 / (1 - p): applied to O once, in the epilogue
};

// The forward's outputs (the epilogue's). LSE is (batch, heads_q, seqlen_q), or (heads_q, total_q)
// for varlen.
struct FwdOutputArgs {
  void* o = nullptr;
  int64_t o_batch_stride = 0, o_row_stride = 0, o_head_stride = 0;
  float* lse = nullptr;  // null: not written
  int64_t lse_batch_stride = 0, lse_head_stride = 0;
  int head_dim = 0;
};

struct FwdArguments {
  SeqArgs seq;
  FwdInputArgs in;
  ScoreArgs score;
  DropoutArgs dropout;
  FwdOutputArgs out;
  bool dropout_enabled = false;  // selects the kernel instantiation (static_switch.h)
  // cuda_sm90: the dynamic tile scheduler's counter, in the caller's forward workspace (null: no
  // workspace; static scheduling). The launch zeroes it (sm90/fwd_launch.h).
  int* tile_counter = nullptr;
};

// ---- Backward. The sequence, score and dropout pieces are the forward's: the backward
// recomputes exactly the forward's P.

// Global-memory inputs of the backward mainloop and the preprocess kernel.
struct BwdInputArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* out = nullptr;   // the forward's O (dropout scaling included): only D reads it
  const void* dout = nullptr;  // dO, laid out like q
  int64_t q_batch_stride = 0, q_row_stride = 0, q_head_stride = 0;
  int64_t k_batch_stride = 0, k_row_stride = 0, k_head_stride = 0;
  int64_t v_batch_stride = 0, v_row_stride = 0, v_head_stride = 0;
  int64_t o_batch_stride = 0, o_row_stride = 0, o_head_stride = 0;
  int64_t do_batch_stride = 0, do_row_stride = 0, do_head_stride = 0;
  int head_dim = 0;  // the caller's head_dim: a multiple of 8, <= the instantiation's kHeadDim
  int kv_group = 1;  // heads_q / heads_kv
  int64_t total_q = -1, total_k = -1;  // varlen: packed rows (FwdInputArgs::total_q / total_k)
};

// Per-row statistics: the forward's LSE (read) and D = rowsum(dO ∘ O) (workspace, written by the
// preprocess kernel, read by the main kernels).
struct BwdRowArgs {
  const float* lse = nullptr;  // (batch, heads_q, seqlen_q) or (heads_q, total_q) for varlen
  int64_t lse_batch_stride = 0, lse_head_stride = 0;
  float* dsum = nullptr;  // workspace: (heads_q, rows_q)
  int64_t rows_q = 0;     // batch · seqlen_q: the row extent of every per-query-row workspace array
  // workspace: LSE · log2(e) and D in tiles of row_stats_block rows (bwd_workspace.h); the
  // preprocess kernel writes them instead of dsum when row_stats_block > 0 (cuda_sm90 sets it to
  // its kernel's query block: 64 or 128)
  float* row_stats = nullptr;
  int row_stats_block = 0;
  // Attention sinks (ScoreArgs::sink_logits) with a dsink output: the preprocess kernel's partial
  // sums (workspace, bwd_workspace.h) and the (heads_q) fp32 gradient; both null otherwise.
  float* dsink_partial = nullptr;
  float* dsink = nullptr;
};

// How the main kernel delivers dK and dV. CTA-uniform, chosen on the host.
enum class DkvMode : int {
  kDirect = 0,   // kv_group == 1: the CTA owns its (key block, kv head): convert and store
  kAtomic = 1,   // GQA: fp32 atomicAdd into dk/dv_accum (heads_kv slices); postprocess converts
  kPartial = 2,  // GQA, deterministic: plain fp32 store into the query head's own slice;
                 // the postprocess sums the group's slices in head order
};

struct BwdGradArgs {
  // dQ: (batch, seqlen_q, heads_q, head_dim) in the dtype.
  void* dq = nullptr;
  int64_t dq_batch_stride = 0, dq_row_stride = 0, dq_head_stride = 0;
  float* dq_accum = nullptr;    // workspace, tiles (bwd_workspace.h); cuda_sm80 nulls it when deterministic
  int* dq_semaphore = nullptr;  // workspace, one per dq_accum tile; deterministic only (cuda_sm90's order)
  // dK, dV: (batch, seqlen_k, heads_kv, head_dim) in the dtype.
  void* dk = nullptr;
  void* dv = nullptr;
  int64_t dk_batch_stride = 0, dk_row_stride = 0, dk_head_stride = 0;
  int64_t dv_batch_stride = 0, dv_row_stride = 0, dv_head_stride = 0;
  DkvMode dkv_mode = DkvMode::kDirect;
  float* dk_accum = nullptr;  // workspace, (rows_k, heads_acc, head_dim), GQA only
  float* dv_accum = nullptr;
  int heads_acc = 0;  // slices in dk/dv_accum: heads_kv (atomic) or heads_q (partial)
  int heads_kv = 0;
  int64_t rows_k = 0;  // batch · seqlen_k
};

struct BwdArguments {
  SeqArgs seq;
  BwdInputArgs in;
  ScoreArgs score;
  DropoutArgs dropout;
  BwdRowArgs rows;
  BwdGradArgs grad;
  bool dropout_enabled = false;  // selects the kernel instantiation
  bool deterministic = false;    // sm80: dQ by the row-parallel kernel; sm90: ordered dQ reductions
};

// Host: the public params -> the arguments above (kernel_args.cpp). The dispatcher has validated
// the call and resolved softmax_scale. `workspace` is the caller's backward workspace, already
// checked to be large enough for bwd_workspace_layout() (bwd_workspace.h).
FwdArguments make_fwd_arguments(const FwdParams& p);
BwdArguments make_bwd_arguments(const BwdParams& p, char* workspace);

// Host: the backward workspace every CUDA implementation needs (bwd_workspace_layout() of the
// call's sizes: the same bytes whichever implementation runs), and the checks of a backward call's
// LSE and workspace against it: kInvalidArgument naming `impl` and the size, before anything runs.
int64_t bwd_workspace_bytes(const BwdParams& p);
Status check_bwd_lse_and_workspace(const BwdParams& p, const char* impl);

// gridDim.y and gridDim.z stop at 65535: supports.h caps heads_q and batch there, and
// cuda_sm90's key-major backward grid (bwd_launch.h) its key blocks.
constexpr int64_t kMaxGridYZ = 65535;

// Head dims are compiled in buckets; a head_dim that is a multiple of 8 runs in the next bucket up
// (the unused columns are zero-filled on load and not stored).
constexpr int kHeadDimBuckets[] = {32, 64, 96, 128, 192, 256};
constexpr int head_dim_bucket(int head_dim) {
  for (int b : kHeadDimBuckets)
    if (head_dim <= b) return b;
  return 0;  // larger than every bucket: unsupported
}

}  // namespace common
}  // namespace flashlab
