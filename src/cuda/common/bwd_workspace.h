// src/cuda/common/bwd_workspace.h — the backward's workspace: what it holds and where.
//
// All fp32, carved from the caller's AttentionConfig::workspace, each section starting on a
// 256-byte boundary; rows_q = batch · seqlen_q and rows_k = batch · seqlen_k, the maximum lengths,
// which bound the packed totals of a varlen batch as well:
//   dsum      heads_q × rows_q                       D_i = rowsum(dO_i ∘ O_i), preprocess kernel
//   row_stats batch × round_up(seqlen_q, 128)        cuda_sm90: per query block of its kernel's
//             × heads_q × 2                          block_m rows (64 or 128; tiles as dq_accum's,
//                                                    row_stats_tile_offset()), its block_m
//                                                    LSE · log2(e), then its block_m D, padded
//                                                    (+inf, 0), so one bulk copy of 8 · block_m
//                                                    bytes loads a block's (written by the
//                                                    preprocess kernel for sm90)
//   dq_accum  batch × round_up(seqlen_q, 128)        dQ / scale, fp32 reductions, in tiles: see
//             × heads_q × bucket(head_dim)           dq_accum_tile_offset() below (deterministic
//                                                    too: cuda_sm90 orders its reductions; cuda_sm80
//                                                    computes dQ without them and ignores it)
//   dq_sem    int32, batch × round_up(seqlen_q, 128) deterministic only: one semaphore per dq_accum
//             / 64 × heads_q                         tile (dq_semaphore_index()), zeroed with
//                                                    dq_accum; cuda_sm90 orders the key blocks'
//                                                    adds to a tile by it (sm80 ignores it)
//   dsink_part batch × ceil(seqlen_q / 64) × heads_q  attention sinks: the preprocess kernel's
//                                                    per-CTA partial sums of dsink (in the order of
//                                                    dsink_partial_index()), summed per head in a
//                                                    fixed order by bwd_dsink_kernel; reserved always
//                                                    (a few KiB), so the size does not depend on sinks
//   dk_accum  rows_k × heads_acc × head_dim          GQA only (kv_group > 1):
//   dv_accum  rows_k × heads_acc × head_dim            heads_acc = heads_kv (atomics) or
//                                                      heads_q (deterministic: one slice per query
//                                                      head, summed in a fixed order afterwards)
// A row's index in dsum, dk_accum and dv_accum is its packed row (varlen: cu_seqlens[b] + t) or
// b · seqlen + t. The layout is a bound over every tile set of every implementation (block_m
// divides 128), so the size an API user asks for does not depend on the GPU.
#pragma once

#include <cstdint>

#include "cuda/common/kernel_args.h"  // head_dim_bucket
#include "flashlab/config.h"          // FLASHLAB_HD

namespace flashlab {
namespace common {

// ---- dq_accum: one contiguous fp32 tile of block_m × bucket per (sequence b, query block m, head),
// tile index (b · ceil(seqlen_q / block_m) + m) · heads_q + head, seqlen_q the call's (maximum)
// length. Inside a tile the values are in the main kernel's *register order*, not row-major:
// sm80/epilogue_bwd.h's DqAccumOrder puts thread t's i-th accumulator value where the threads of a
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
// Floats of dq_accum that `batch` sequences use with this tile (what the launch zeroes): the offset
// of the tile after the last one.
FLASHLAB_HD int64_t dq_accum_floats(int batch, int seqlen_q, int heads_q, int block_m, int bucket) {
  return dq_accum_tile_offset(batch, 0, 0, seqlen_q, heads_q, block_m, bucket);
}

// ---- dq_sem: the semaphore of dq_accum's tile (b, m_block, head), in the tiles' order. Reserved
// for tiles of kDqSemaphoreMinBlockM rows, so any block_m in [64, 128] dividing 128 fits.
constexpr int kDqSemaphoreMinBlockM = 64;
FLASHLAB_HD int64_t dq_semaphore_index(int b, int m_block, int head, int seqlen_q, int heads_q, int block_m) {
  return dq_accum_tile_offset(b, m_block, head, seqlen_q, heads_q, block_m, 1) / block_m;
}
// Semaphores that `batch` sequences use with this tile (what the launch zeroes).
FLASHLAB_HD int64_t dq_semaphore_count(int batch, int seqlen_q, int heads_q, int block_m) {
  return dq_semaphore_index(batch, 0, 0, seqlen_q, heads_q, block_m);
}

// ---- row_stats: the tile of (sequence b, query block m of block_m rows, head): block_m LSE ·
// log2(e) (+inf where the row has no visible key or lies past the sequence: P = 0 there), then
// block_m D (0 past the sequence). Written by the preprocess kernel when BwdRowArgs::row_stats_block
// = block_m > 0 (cuda_sm90), read by the main kernel's producer.
FLASHLAB_HD int64_t row_stats_tile_offset(int b, int m_block, int head, int seqlen_q, int heads_q, int block_m) {
  return dq_accum_tile_offset(b, m_block, head, seqlen_q, heads_q, block_m, 2);
}

// ---- dsink_part: the partial sum of (sequence b, 64-row query block m, head).
constexpr int kDsinkBlockRows = 64;
FLASHLAB_HD int64_t dsink_partial_index(int b, int m_block, int head, int seqlen_q, int heads_q) {
  const int64_t blocks = (seqlen_q + kDsinkBlockRows - 1) / kDsinkBlockRows;
  return (int64_t(b) * blocks + m_block) * heads_q + head;
}

// ---- Workspace layout (host). Offsets in bytes from the workspace base.
struct BwdWorkspaceLayout {
  int64_t dsum = 0, row_stats = 0, dq_accum = -1, dq_sem = -1, dsink_part = -1, dk_accum = -1,
          dv_accum = -1;  // -1: absent
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
  const int64_t rows_padded = batch * ((seqlen_q + kDqAccumRowAlign - 1) / kDqAccumRowAlign * kDqAccumRowAlign);
  w.row_stats = at;
  at += bwd_align256(4 * rows_padded * heads_q * 2);
  w.dq_accum = at;
  at += bwd_align256(4 * rows_padded * heads_q * head_dim_bucket(static_cast<int>(head_dim)));
  if (deterministic) {
    w.dq_sem = at;
    at += bwd_align256(4 * (rows_padded / kDqSemaphoreMinBlockM) * heads_q);
  }
  w.dsink_part = at;
  at += bwd_align256(4 * dsink_partial_index(static_cast<int>(batch), 0, 0, static_cast<int>(seqlen_q),
                                             static_cast<int>(heads_q)));
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

}  // namespace common
}  // namespace flashlab
