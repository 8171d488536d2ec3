// src/cuda/sm80/bwd_params.h — the backward kernels' parameters and their workspace layout.
//
// Like fwd_params.h: one plain struct per piece, no CuTe, so api_sm80.cpp includes it without
// compiling a kernel. The sequence, score and dropout pieces are the forward's own structs
// (SeqParams, ScoreParams, DropoutParams): the backward recomputes exactly the forward's P.
//
// Workspace (all fp32, carved from the caller's AttentionConfig::workspace, each section starting
// on a 256-byte boundary; rows_q = batch · seqlen_q and rows_k = batch · seqlen_k, the maximum
// lengths, which bound the packed totals of a varlen batch as well):
//   dsum      heads_q × rows_q                       D_i = rowsum(dO_i ∘ O_i), preprocess kernel
//   dq_accum  batch × round_up(seqlen_q, 128)        dQ / scale, fp32 atomics   (not deterministic),
//             × heads_q × bucket(head_dim)           in tiles: see dq_accum_tile_offset() below
//   dk_accum  rows_k × heads_acc × head_dim          GQA only (kv_group > 1):
//   dv_accum  rows_k × heads_acc × head_dim            heads_acc = heads_kv (atomics) or
//                                                      heads_q (deterministic: one slice per query
//                                                      head, summed in a fixed order afterwards)
// A row's index in dsum, dk_accum and dv_accum is its packed row (varlen: cu_seqlens[b] + t) or
// b · seqlen + t.
#pragma once

#include <cstdint>

#include "cuda/sm80/fwd_params.h"
#include "cuda/sm80/tile_size.h"  // head_dim_bucket
#include "flashlab/config.h"      // FLASHLAB_HD
#include "flashlab/dtype.h"
#include "flashlab/status.h"

namespace flashlab {
namespace sm80 {

// Global-memory inputs of the backward mainloop (mainloop_bwd.h) and the preprocess kernel.
struct BwdInputParams {
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
};

// Per-row statistics: the forward's LSE (read) and D = rowsum(dO ∘ O) (workspace, written by the
// preprocess kernel, read by the main kernels).
struct BwdRowParams {
  const float* lse = nullptr;  // (batch, heads_q, seqlen_q) or (heads_q, total_q) for varlen
  int64_t lse_batch_stride = 0, lse_head_stride = 0;
  float* dsum = nullptr;  // workspace: (heads_q, rows_q)
  int64_t rows_q = 0;     // batch · seqlen_q: the row extent of every per-query-row workspace array
};

// How the main kernel delivers dK and dV (epilogue_bwd.h). CTA-uniform, chosen on the host.
enum class DkvMode : int {
  kDirect = 0,   // kv_group == 1: the CTA owns its (key block, kv head): convert and store
  kAtomic = 1,   // GQA: fp32 atomicAdd into dk/dv_accum (heads_kv slices); postprocess converts
  kPartial = 2,  // GQA, deterministic: plain fp32 store into the query head's own slice;
                 // the postprocess sums the group's slices in head order
};

struct BwdGradParams {
  // dQ: (batch, seqlen_q, heads_q, head_dim) in the dtype.
  void* dq = nullptr;
  int64_t dq_batch_stride = 0, dq_row_stride = 0, dq_head_stride = 0;
  float* dq_accum = nullptr;  // workspace, tiles (dq_accum_tile_offset); null: deterministic mode
  // dK, dV: (batch, seqlen_k, heads_kv, head_dim) in the dtype.
  void* dk = nullptr;
  void* dv = nullptr;
  int64_t dk_batch_stride = 0, dk_row_stride = 0, dk_head_stride = 0;
  int64_t dv_batch_stride = 0, dv_row_stride = 0, dv_head_stride = 0;
  DkvMode dkv_mode = DkvMode::kDirect;
  float* dk_accum = nullptr;  // workspace, (rows_k, heads_acc, head_dim), GQA only
  float* dv_accum = nullptr;
  int heads_acc = 0;  // heads_kv (kAtomic) or heads_q (kPartial)
  int heads_kv = 0;
  int64_t rows_k = 0;  // batch · seqlen_k
};

struct BwdKernelParams {
  SeqParams seq;
  BwdInputParams in;
  ScoreParams score;
  DropoutParams dropout;
  BwdRowParams rows;
  BwdGradParams grad;
  bool dropout_enabled = false;  // selects the kernel instantiation (bwd_launch.h)
  bool deterministic = false;    // dQ by the row-parallel kernel instead of atomics
};

// ---- dq_accum: one contiguous fp32 tile of block_m × bucket per (sequence b, query block m, head),
// tile index (b · ceil(seqlen_q / block_m) + m) · heads_q + head, seqlen_q the call's (maximum)
// length. Inside a tile the values are in the main kernel's *register order*, not row-major:
// epilogue_bwd.h's dq_accum_index() puts thread t's i-th accumulator value where the threads of a
// warp write consecutive addresses, so each reduction instruction covers whole 128-byte lines
// (FlashAttention-2's layout too), and bwd_convert_dq_kernel reads them back the same way. Rows
// past a sequence's end and columns past head_dim are in the tile (they receive zeros) and are
// never converted. block_m divides kDqAccumRowAlign, so the tiles fit in the rows reserved below.
constexpr int kDqAccumRowAlign = 128;

FLASHLAB_HD int64_t dq_accum_tile_offset(int b, int m_block, int head, int seqlen_q, int heads_q, int block_m,
                                         int bucket) {
  const int64_t tiles_per_sequence = (seqlen_q + block_m - 1) / block_m;
  return ((int64_t(b) * tiles_per_sequence + m_block) * heads_q + head) * int64_t(block_m) * bucket;
}

// ---- Workspace layout (host). Offsets in bytes from the workspace base.
struct BwdWorkspaceLayout {
  int64_t dsum = 0, dq_accum = -1, dk_accum = -1, dv_accum = -1;  // -1: section absent
  int64_t bytes = 0;                                              // total size required
};

inline int64_t bwd_align256(int64_t x) {
  return (x + 255) / 256 * 256;
}

// batch, seqlen_q, seqlen_k: the call's (maximum) sizes; see the file comment for the formula.
inline BwdWorkspaceLayout bwd_workspace_layout(int64_t batch, int64_t seqlen_q, int64_t seqlen_k,
                                               int64_t heads_q, int64_t heads_kv, int64_t head_dim,
                                               bool deterministic) {
  const int64_t rows_q = batch * seqlen_q, rows_k = batch * seqlen_k;
  BwdWorkspaceLayout w;
  int64_t at = 0;
  w.dsum = at;
  at += bwd_align256(4 * heads_q * rows_q);
  if (!deterministic) {
    const int64_t rows_padded = batch * ((seqlen_q + kDqAccumRowAlign - 1) / kDqAccumRowAlign * kDqAccumRowAlign);
    w.dq_accum = at;
    at += bwd_align256(4 * rows_padded * heads_q * head_dim_bucket(static_cast<int>(head_dim)));
  }
  if (heads_q != heads_kv) {
    const int64_t heads_acc = deterministic ? heads_q : heads_kv;
    w.dk_accum = at;
    at += bwd_align256(4 * rows_k * heads_acc * head_dim);
    w.dv_accum = at;
    at += bwd_align256(4 * rows_k * heads_acc * head_dim);
  }
  w.bytes = at;
  return w;
}

// One explicit instantiation per (dtype, head-dim bucket): instantiations/bwd_hdim{D}_{dtype}.cu,
// generated by tools/generate_kernels.py. Launches preprocess, main (and, deterministic, the dQ
// kernel) and postprocess on `stream` (a cudaStream_t); the workspace pointers in `params` must
// already point into the caller's workspace.
template <DType kDType, int kHeadDim>
Status run_bwd(const BwdKernelParams& params, void* stream);

}  // namespace sm80
}  // namespace flashlab
