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
#include "cuda/common/persistent_waves.h"

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

// The Hopper forward's scheduler (sm90/flash_fwd_kernel.h): a 1-D grid of G CTAs, each running
// tiles in turn. Tile t = (m_block, head, batch). Two ways of handing tiles to CTAs:
//
// Static waves (counter null). Tiles are numbered with m_block the fastest index, last query
// block first: consecutive tiles share a head's K and V (in L2 while they run together), and a
// causal head's longest tile starts first. In wave k the CTA with blockIdx.x = c takes tile
//   t = k * G + (c + k) mod G        (one tile per CTA per wave; none past `tiles`)
// G = tiles: one tile per CTA (k = 0 only: t = blockIdx.x), the classic grid. G = the SM count:
// persistent CTAs, whose producer loads the next tile's K, V and Q while the consumers finish the
// current one. The rotation by k matters under a causal mask: with G a multiple of the query
// blocks per head (132 SMs, 4 blocks at seqlen 512) a plain k * G + c would hand a CTA the same
// query block, so the same amount of work, in every wave; rotated, each CTA cycles through them.
//
// Dynamic (counter set: a zeroed int in the caller's forward workspace; fwd_launch.h). CTA c
// starts with tile c; each later tile is G + atomicAdd(counter, 1), taken by the CTA's producer
// while it loads the current one (none once >= tiles), so a CTA takes the next tile when it is
// free: unequal (causal) tiles balance as under one tile per CTA, with the prologue and epilogue
// hidden as under persistent CTAs. Tiles then go in grouped_tile_coords' order, longest first
// within groups of `group` (head, sequence) pairs.
//
// The formulas live in persistent_waves.h (tests/test_persistent_waves.cpp checks them).
struct PersistentFwdTileScheduler {
  struct Params {
    SeqArgs seq;
    int m_blocks = 0;         // query blocks per (sequence, head)
    int tiles = 0;            // m_blocks x bh_count
    int bh_count = 0;         // (head, sequence) pairs: heads_q x batch
    int* counter = nullptr;   // dynamic: the tile counter (zero at the launch); null: static waves
    int group = 1;            // dynamic: (head, sequence) pairs per L2 group (grouped_tile_coords)
  };
  using Arguments = SeqArgs;
  static Params to_params(const Arguments& a, int block_m) {
    Params p;
    p.seq = a;
    p.m_blocks = (a.seqlen_q + block_m - 1) / block_m;
    // int: 2^31 tiles of >= 64 rows would be > 2^37 query rows of one head dim >= 8 (petabytes).
    p.tiles = static_cast<int>(int64_t(p.m_blocks) * a.heads_q * a.batch);
    p.bh_count = static_cast<int>(int64_t(a.heads_q) * a.batch);
    return p;
  }
  // max_ctas >= tiles: one tile per CTA; else max_ctas persistent CTAs.
  static dim3 grid(const Params& p, int max_ctas) {
    return dim3(static_cast<unsigned>(p.tiles < max_ctas ? p.tiles : max_ctas), 1, 1);
  }
  // Static waves: this CTA's tile of wave k, or -1: no tile in wave k or after it. Wave 0's is
  // blockIdx.x, also the dynamic scheduler's first tile.
  __device__ static int tile_index(const Params& p, int k) {
    const int64_t t = wave_tile(k, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x));
    return t < p.tiles ? static_cast<int>(t) : -1;
  }
  // Dynamic: the next tile's index, unchecked (>= tiles: none; none_if_past).
  __device__ static int fetch_next(const Params& p) {
    return static_cast<int>(gridDim.x) + atomicAdd(p.counter, 1);
  }
  __device__ static int none_if_past(const Params& p, int t) { return t < p.tiles ? t : -1; }
  // Tile t in the static order, or (kGrouped: a kernel that can count its tiles) in the order the
  // launch chose, grouped when p.group > 1.
  template <bool kGrouped = false>
  __device__ static WorkTile tile(const Params& p, int t) {
    WorkTile w;
    const WaveTileCoords c = kGrouped && p.group > 1 ? grouped_tile_coords(t, p.m_blocks, p.group, p.bh_count)
                                                     : wave_tile_coords(t, p.m_blocks);
    w.m_block = c.m_block;
    w.head = c.bh % p.seq.heads_q;
    w.set_sequence(p.seq, c.bh / p.seq.heads_q);
    return w;
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
  // Key block 0 of every (head, sequence) first, then block 1, ... (the grid's CTAs in launch
  // order, x fastest, renumbered). cuda_sm80's backward with StreamingLLM sink tokens: a block
  // holding sink keys is visited by every query block after its first, so its CTA runs longest;
  // in the plain order the last heads' sink CTAs start in the last wave and stretch the tail.
  __device__ static WorkTile get_tile_low_keys_first(const Params& p, int* n_block) {
    const int64_t per_block = int64_t(gridDim.y) * gridDim.z;  // CTAs per key block
    const int64_t linear = blockIdx.x + int64_t(gridDim.x) * (blockIdx.y + int64_t(gridDim.y) * blockIdx.z);
    const int64_t rest = linear % per_block;
    *n_block = static_cast<int>(linear / per_block);
    WorkTile t;
    t.head = static_cast<int>(rest % gridDim.y);
    t.set_sequence(p, static_cast<int>(rest / gridDim.y));
    return t;
  }
  // Key-major: grid (heads_q, batch, key blocks), so the CTAs launch key block 0 of every head and
  // sequence first, then block 1, ... — get_tile_low_keys_first's order read straight from
  // blockIdx (cuda_sm90's backward: values from blockIdx cost no registers to keep).
  static dim3 grid_key_major(const Params& p, int block_n) {
    const dim3 g = grid(p, block_n);
    return dim3(g.y, g.z, g.x);
  }
  __device__ static WorkTile get_tile_key_major(const Params& p, int* n_block) {
    WorkTile t;
    *n_block = static_cast<int>(blockIdx.z);
    t.head = static_cast<int>(blockIdx.x);
    t.set_sequence(p, static_cast<int>(blockIdx.y));
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
