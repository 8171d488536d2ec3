// src/cuda/common/tile_scheduler.h — which tile a CTA computes, and where its sequence lives.
//
// WorkTile: one CTA's (query block, head, sequence) and the sequence's lengths and offsets.
// A scheduler is a kernel piece like the others: host Arguments (SeqArgs), device Params,
// to_params(), grid() for the launch and get_tile() in the kernel.
//
// FwdTileScheduler grid: x = query blocks of the longest sequence, y = query head, z = batch entry. Blocks
// are handed out in reverse query order: with a causal mask the last query block sees the most keys, and
// starting the longest tiles first shortens the tail of the grid. With cu_seqlens a CTA whose block lies past
// its sequence's end exits at once.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>  // dim3, blockIdx

#include "cuda/common/kernel_args.h"

namespace flashlab {
namespace common {

struct WorkTile {
  int m_block = 0;  // query block: rows [m_block * kBlockM, (m_block + 1) * kBlockM) of the sequence
  int head = 0;     // query head
  int batch = 0;    // sequence index (also the Philox batch key for varlen)
  int q_len = 0;    // this sequence's lengths
  int k_len = 0;
  int64_t q_begin = 0;  // first packed row of the sequence (varlen), else 0
  int64_t k_begin = 0;
  bool varlen = false;

  // Element offset of row `row` (inside the sequence) of head `h`, for a tensor with these strides.
  // int64 throughout: a packed batch of 2^31 elements is ordinary.
  __device__ __forceinline__ int64_t q_offset(int64_t batch_stride, int64_t row_stride, int64_t head_stride,
                                              int64_t row, int h) const {
    const int64_t base = varlen ? (q_begin + row) * row_stride : batch * batch_stride + row * row_stride;
    return base + h * head_stride;
  }
  __device__ __forceinline__ int64_t k_offset(int64_t batch_stride, int64_t row_stride, int64_t head_stride,
                                              int64_t row, int h) const {
    const int64_t base = varlen ? (k_begin + row) * row_stride : batch * batch_stride + row * row_stride;
    return base + h * head_stride;
  }
  // Sequence `b`'s lengths and packed offsets: from cu_seqlens (varlen), else the call's lengths.
  // Both passes' schedulers set the tile's sequence with it.
  __device__ __forceinline__ void set_sequence(const SeqArgs& p, int b) {
    batch = b;
    varlen = p.cu_seqlens_q != nullptr;
    if (varlen) {
      q_begin = p.cu_seqlens_q[b];
      q_len = static_cast<int>(p.cu_seqlens_q[b + 1] - q_begin);
      k_begin = p.cu_seqlens_k[b];
      k_len = static_cast<int>(p.cu_seqlens_k[b + 1] - k_begin);
    } else {
      q_len = p.seqlen_q;
      k_len = p.seqlen_k;
    }
  }
  // LSE entry of row 0 of this (sequence, head): (batch, heads_q, seqlen_q) or (heads_q, total_q).
  __device__ __forceinline__ int64_t lse_offset(int64_t batch_stride, int64_t head_stride) const {
    return varlen ? head * head_stride + q_begin : batch * batch_stride + head * head_stride;
  }
};

struct FwdTileScheduler {
  using Arguments = SeqArgs;
  using Params = SeqArgs;
  static Params to_params(const Arguments& a) { return a; }

  static dim3 grid(const Params& p, int block_m) {
    return dim3(static_cast<unsigned>((p.seqlen_q + block_m - 1) / block_m), static_cast<unsigned>(p.heads_q),
                static_cast<unsigned>(p.batch));
  }

  __device__ static WorkTile get_tile(const Params& p) {
    WorkTile t;
    t.m_block = static_cast<int>(gridDim.x - 1 - blockIdx.x);
    t.head = static_cast<int>(blockIdx.y);
    t.set_sequence(p, static_cast<int>(blockIdx.z));
    return t;
  }
};

// The backward's main kernel: one CTA = one key block of one query head (FlashAttention-2's outer
// loop); grid (key blocks of the longest sequence, heads_q, batch). get_tile_descending hands the
// key blocks of a (head, sequence) out last first: cuda_sm90's deterministic mode orders the dQ
// reductions so that a CTA waits only for CTAs of higher key blocks, which then have the lower
// block indices (sm90/flash_bwd_kernel.h).
struct BwdTileScheduler {
  using Arguments = SeqArgs;
  using Params = SeqArgs;
  static Params to_params(const Arguments& a) { return a; }

  static dim3 grid(const Params& p, int block_n) {
    return dim3(static_cast<unsigned>((p.seqlen_k + block_n - 1) / block_n), static_cast<unsigned>(p.heads_q),
                static_cast<unsigned>(p.batch));
  }
  // t.m_block is left 0: the main kernel sets it per query block it visits.
  __device__ static WorkTile get_tile(const Params& p, int* n_block) {
    WorkTile t;
    *n_block = static_cast<int>(blockIdx.x);
    t.head = static_cast<int>(blockIdx.y);
    t.set_sequence(p, static_cast<int>(blockIdx.z));
    return t;
  }
  __device__ static WorkTile get_tile_descending(const Params& p, int* n_block) {
    WorkTile t = get_tile(p, n_block);
    *n_block = static_cast<int>(gridDim.x) - 1 - *n_block;
    return t;
  }
};

}  // namespace common
}  // namespace flashlab
