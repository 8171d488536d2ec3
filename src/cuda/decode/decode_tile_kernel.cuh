// src/cuda/decode/decode_tile_kernel.cuh — the "tile" decode kernel (FLASHLAB_DECODE_KERNEL=tile;
// docs/kvcache.md, "CUDA"): the same work and semantics as decode_kernel.cuh's loop ("v5"),
// but K and V stream through shared memory in tiles, with a multi-stage cp.async pipeline, and the math is
// tensor-core mma.sync from shared memory.
//
// Why: v5 loads 16-byte chunks into registers, two keys per group of lanes per iteration: too few
// bytes in flight per SM, so it is latency-bound (about 1.0 TB/s on an H100 where the copy ceiling
// is about 3.0). Here a CTA keeps kStages - 1 tiles of K and V in flight while it computes on one
// (hdim 128: 2 x 32 KiB per CTA, 2 CTAs per SM), and the copies need no registers. Measured (H100,
// 2026-11-24, B 32, GQA 32/8, hdim 128, bf16, L 1k..64k): 1.9-3.0 TB/s against v5's 1.0-1.1.
//
// One CTA = (split, sequence b, kv head, chunk of kTileRows = 16 query rows; cta_work() in
// decode_kernel.cuh: the chunks of one (b, kv head) are neighbours in launch order, so their K/V
// reads after the first come from L2): the rows are the (query position, query head of the group)
// pairs as in v5, padded with zero rows to the 16 rows of mma.m16n8k16, so GQA's query heads share
// every K/V byte. Per tile of kBlockN keys (K and V, each (kBlockN, kD) in the dtype, rows swizzled
// in shared memory):
//   warp w takes keys 16w .. 16w + 15 of the tile (hdim 256: warps 2k, 2k+1 take keys 16k.., each
//   for half of O's columns):
//   S = Q·Kᵀ       (16 rows x 16 keys: D/16 k-steps x 2 mma; Q and K through ldmatrix)
//   S -> masked, modified (score_chain: scale, softcap, ALiBi), online softmax per row (quad shuffles)
//   O += P·V       (P stays in registers as the A operand; V through ldmatrix.trans; D/8 mma)
// Each warp keeps its own (m, l, O) over its keys, like v5's groups; at the end the warps are merged
// through shared memory (merge_and_store, shared with v5) and written as O / LSE or the split's
// partials, which combine_kernel.cuh merges.
//
// Instructions per tile (the kernel streams at DRAM speed only while its warps issue the next copies
// in time; ncu, H100, B 32 GQA 32/8 L 64k: 908 M instructions before these, 331 M after, and the
// kernel 2.85 -> 2.76 ms; docs/perf.md, "Decode: the tile kernel's instructions"):
//   - contiguous caches (kPaged false) copy from a per-thread pointer moved on by the row stride:
//     no per-key index math; paged caches translate a tile's rows through the page table once per
//     row, tiles ahead, into shared memory (read_entry / store_entry; the page division a multiply-high,
//     FastDiv), so a copy reads its row's offset and never waits on a table read;
//   - Q's A fragments stay in registers (hdim <= 128);
//   - a tile every real row sees in full, without softcap or ALiBi ("interior"), skips the per-key
//     mask and score chain;
//   - O's rescale is skipped by a warp when no row's maximum moved.
//
// Masking and NaN: keys past the union of the rows' visible keys (the tile's tail) are zero-filled by
// cp.async (src-size 0: nothing is read), and so are the columns past head_dim of an off-bucket head
// dim; every key inside the union is a filled cache slot (j < L). A key a row does not see gets
// score -inf by selection (never by a multiply), so P = 0 for it, and 0 · (finite V) = 0.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/common/math.h"
#include "cuda/common/ptx_sm80.cuh"
#include "cuda/decode/append_kernel.cuh"
#include "cuda/decode/decode_kernel.cuh"
#include "cuda/decode/decode_timeline.cuh"

namespace flashlab {
namespace decode {

constexpr int kTileRows = 16;  // query rows per CTA: the M of mma.m16n8k16 (v5: kRows = 4)

// The tile kernel's shape per head-dim bucket. Chosen from Little's law, not from an A/B of shapes
// (hdim 128 reaches 3.1 TB/s at L 64k on an H100, 2026-11-24; 64 and 256 are verified, not timed).
// At ~3 TB/s over 132 SMs and ~1 µs of DRAM
// latency an SM needs ~23 KiB in flight; each CTA here keeps (stages - 1) tiles of K + V in flight.
//   warps:      each warp takes 16 keys of a tile (one k-step of P·V) and col_split warps take the
//               same 16 keys, each for 1 / col_split of O's columns (S is computed by each of them):
//               block_n = 16 · warps / col_split.
//   d <= 64:    4 warps, 64 keys, 4 stages: 16 KiB a stage, 70 KiB of shared memory (the paged row
//               offsets' ring included), 3 CTAs per SM (48 KiB in flight per CTA). ptxas sm_90a
//               (bf16, session 28): 140 registers (paged 149), no spill.
//   d <= 128:   4 warps, 64 keys, 3 stages: 32 KiB a stage, 103 KiB, 2 CTAs per SM (64 KiB in flight
//               per CTA). A 4th stage would leave 1 CTA per SM. ptxas: 207 registers (paged 214), no
//               spill.
//   d <= 256:   4 warps in 2 column halves, 32 keys, 3 stages: 32 KiB a stage, 105.5 KiB, 2 CTAs per
//               SM; ptxas: 213 registers (paged 204), no spill. Without the column split a warp holds O as
//               16 x 256 fp32 (128 registers a thread): ptxas capped at 255 registers and spilled
//               (2 warps, 32 keys: 24 bytes).
// min_blocks is what ptxas is asked for (__launch_bounds__): the CTAs per SM that shared memory
// allows, so registers never limit occupancy below it. Devices with less than the shared memory
// (sm_86 / sm_89: 99 KiB a block) run v5 instead (decode.cu).
struct TileShape {
  int warps, block_n, stages, min_blocks, col_split;
};
constexpr TileShape tile_shape(int d) {
  return d <= 64    ? TileShape{4, 64, 4, 3, 1}
         : d <= 128 ? TileShape{4, 64, 3, 2, 1}
                    : TileShape{4, 32, 3, 2, 2};
}

// How a CTA's warps share a tile (kRowGroups, a template argument of the kernel): the warps form
// kRowGroups groups of 16 query rows (the CTA has 16 · kRowGroups rows), and each group's warps
// split the tile's keys (key_warps of them; hdim 256: pairs of warps split O's columns instead).
//   1 ("key warps", up to 16 rows per CTA): each warp takes 16 keys of every tile; the warps'
//     softmax states are merged at the end. One decode token with a GQA group <= 16.
//   2 (hdim <= 128): 32 rows, two warps per 16 rows with 32 keys each.
//   4 (hdim <= 128): 64 rows, a warp per 16 rows with every key (FlashAttention-2's split; no
//     merge). The template allows it; decode.cu does not instantiate it: slower than 2 at every shape tried.
// More rows per CTA read a tile once for more rows (several CTAs per kv head read each tile, the
// 2nd.. from L2); fewer keys per warp shorten a warp's work per tile (a warp with 64 keys per tile
// could not keep up with the tile's share of DRAM time). decode.cu (tile_row_groups) picks 1 or 2
// (docs/perf.md, "Row groups for many query rows"); a warp whose rows are all padding computes nothing.
constexpr int cta_rows(int row_groups) { return 16 * row_groups; }
constexpr int key_warps(int d, int row_groups) {
  return tile_shape(d).warps / (row_groups * tile_shape(d).col_split);
}

// The queries' and new keys' counts whose rotary-table rows and k_new / v_new rows the tile kernel
// stages in shared memory (stage_new_rows, stage_tables, below): larger ones go to the append kernel
// (decode.cu).
constexpr int kStagedRows = 16;
// An sm_90 SM's shared memory (228 KiB; 227 KiB at most a block) and what the hardware reserves of
// it per CTA. (An sm_80 SM has 164 KiB: there hdim 128 and 256 run one CTA an SM, with or without
// new_rows, and hdim 64 two.)
constexpr int kSmemPerSm = 228 * 1024, kSmemReservedPerCta = 1024;
// The new keys a CTA of the fused append holds in shared memory (TileSmem::new_rows): the most of
// 16, 8, 4, 2, 1 that keeps tile_shape(d).min_blocks CTAs on an sm_90 SM beside the rest of
// TileSmem (q, the stages with their paged offsets; the merge buffers alias the stages and are
// smaller). decode.cu appends in the kernel only where seqlen_new <= it: hdim 64 16 (8 with 2 row
// groups), 128 16 (8), 256 4.
constexpr int tile_base_bytes(int d, int row_groups) {
  return cta_rows(row_groups) * d * 2 + tile_shape(d).stages * tile_shape(d).block_n * (2 * d * 2 + 16) +
         64;  // TileSmem::store and patch
}
constexpr int new_rows_cap(int d, int row_groups) {
  int n = 16;
  while (n > 0 &&
         tile_shape(d).min_blocks * (tile_base_bytes(d, row_groups) + 2 * n * d * 2 + kSmemReservedPerCta) > kSmemPerSm)
    n /= 2;
  return n;
}

// What store_new_keys writes, found by thread 0 in the prologue from what the CTA has in registers
// then: the keys [j0, n1) of the sequence's new keys that this split holds. Found again after the
// loop (the CTA's coordinates, the sequence's length from cache_seqlens) it cost the fused step a
// chain of global loads that waited behind the other CTAs' copies (docs/perf.md, session 34).
struct NewKeyStores {
  int64_t slot0;           // the cache slot of key j0 (lp + j0)
  int64_t k_row0, v_row0;  // contiguous: its K and V rows' element offsets (paged: per key, later)
  int first, keys;         // j0's index among new_rows' keys, and how many to write (0: none)
};

// Shared memory of the tile kernel. 16-bit elements as uint16_t (the union needs trivial types).
// Rows are swizzled (swizzle()): an ldmatrix reads 8 rows of one 16-byte column chunk, which without
// it would sit in the same banks (rows are 128 / 256 / 512 bytes).
template <int kD, int kRowGroups>
struct TileSmem {
  static constexpr TileShape kShape = tile_shape(kD);
  static constexpr int kRows = cta_rows(kRowGroups);
  static constexpr int kKeyWarps = key_warps(kD, kRowGroups);  // warps with different keys of a row
  alignas(16) uint16_t q[kRows * kD];                         // (kRows, kD)
  union {
    struct {
      alignas(16) uint16_t k[kShape.stages][kShape.block_n * kD];  // (stages, block_n, kD)
      alignas(16) uint16_t v[kShape.stages][kShape.block_n * kD];  // (stages, block_n, kD)
      // Paged caches: the element offsets (K, V) of a tile's rows, page table already applied,
      // written kStages tiles ahead by the CTA (a (row, K or V) per thread: read_entry / store_entry
      // in the kernel) and read by every thread copying the row; a ring of a slot per stage.
      // Contiguous caches leave it unused.
      alignas(16) int64_t off[kShape.stages][kShape.block_n][2];  // (stages, block_n, K | V)
    } kv;
    struct {                       // after the loop: the key warps' softmax states for merge_and_store
      float m[kKeyWarps * kRows];  // (key warps, kRows)
      float l[kKeyWarps * kRows];  // (key warps, kRows)
      float o[kKeyWarps * kRows * kD];  // (key warps, kRows, kD)
    } merge;
  };
  // After the stages, which keep their offsets: placed between q and the stages, the new rows
  // (8 KiB + 16 bytes) left the stages 16 bytes off a 128-byte boundary, and the plain decode ran
  // 12 % slower (H200, 1k and 4k; docs/perf.md, session 32). The fused append's new keys (K
  // rotated, V), 2 rows a key (stage_new_rows); where the loop copies them into a tile (relative to
  // the CTA's first key k_begin: the first new key and the CTA's key count); and where
  // store_new_keys writes them. Kept here, not in registers through the loop.
  alignas(16) uint16_t new_rows[2 * new_rows_cap(kD, kRowGroups) * kD];
  NewKeyStores store;
  int patch[2];
};

// Element index of (row, 16-byte chunk c) in a swizzled (rows, kD) buffer: chunk c ^ (row % 8), so
// the 8 rows of an ldmatrix matrix fall in 8 different bank groups (kD >= 64: >= 8 chunks a row).
template <int kD>
__device__ __forceinline__ int swizzle(int row, int c) {
  static_assert(kD >= 64, "the swizzle permutes 8 chunks of a row");
  return row * kD + ((c ^ (row & 7)) << 3);
}

// ---- the instructions: cuda/common/ptx_sm80.cuh (fragment layouts there).
using ptx::cp_async_16;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::ldmatrix_x4;
using ptx::ldmatrix_x4_trans;
using ptx::mma_16816;
using ptx::smem_u32;
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  const typename Vec<T>::T2 v = Vec<T>::from_float2(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// kPaged: the cache is paged (p.block_table); false: contiguous rows, one per slot, so a thread's
// copy addresses are a base pointer plus multiples of the row stride (no per-key index math).
// kRowGroups: see cta_rows() above.
// The fused append and the queries' rotation inside the tile kernel (DecodeParams::append_in_kernel,
// q_rotate) touch no global memory between the prologue's tile copies and the end of the loop: a
// load or store issued behind those copies waits for them (~16 MB from all CTAs at B 32, hdim
// 128). Per-CTA globaltimer marks (H200, 1k, L2 flushed) had the prologue end at 9-10 µs with the
// rotation's and the append's global loads and stores there (and a gpu-scope fence in the loop),
// against 5 µs for a plain decode; a step with append + rotary took 21 % longer than a plain one,
// 15 % now (CUDA-graph replays; docs/perf.md, session 32). So:
//   * stage_new_rows copies (cp.async) k_new / v_new rows t of the sequence's seqlen_new into
//     TileSmem::new_rows at the kernel's start, beside Q's loads: they need no length;
//   * stage_tables copies the rotary tables' rows of the positions [pos0, L) (the queries'
//     positions L - seqlen_q + i and the new keys' j) into the pipeline's last stage, which no
//     tile uses before the loop, once split_keys has the length and before the tile copies; one
//     group with the new rows, waited for after the tile copies' issue;
//   * the sequence's append rule (seq_ok) comes from the lengths split_keys read;
//   * rotate_new_keys rotates the staged K rows in place; the loop copies the new rows into the
//     stage of each tile that holds them (the tile's copies brought the slots' old contents);
//   * store_new_keys writes them to the cache after the loop, when no copy is in flight (no other
//     CTA reads them in this kernel: no fence).
// Both counts are <= kStagedRows (decode.cu sends larger ones to the append kernel); the new rows
// are <= new_rows_cap (TileSmem).
//   new_rows:  new key t's (key L - seqlen_new + t) K row at row 2 t, its V row at 2 t + 1 (kD
//              elements a row);
//   K stage:   cos row of position pos0 + r at row r, sin row at kStagedRows + r (a table row is
//              rotary_dim / 2 entries of <= 4 bytes: <= kD 16-bit elements; <= 32 rows).
// The out-of-line functions below take what they read by value (Staged, scalars), not the
// DecodeParams: through a `const DecodeParams&` an out-of-line function reads the parameters with
// generic loads from memory (the kernel's body reads them from the constant bank), which go out
// behind the tile copies. And they read the staged rows with ld.shared (SharedMem, ptx::lds): their
// pointers are generic, so the compiler emitted generic loads. Measured together with the
// branch-free round_to_odd_float (append_kernel.cuh) in docs/perf.md, session 33: the rotation,
// not these loads, was most of the fused step's extra time.
struct SharedMem {
  template <typename W>
  __device__ static __forceinline__ W load(const void* ptr) {
    return ptx::lds<W>(ptr);
  }
};
struct Staged {
  uint16_t* rows;               // TileSmem::new_rows
  uint16_t* tables;             // the last stage's K tile
  int64_t pos0;                 // the position of table row 0
  const void *cos, *sin;        // the tables (DecodeParams::cos, sin)
  int rotary_dim, table_dtype;  // DecodeParams' rotary fields
  bool neox;
};
// A Staged's rotary fields from the call's (rows, tables and pos0 are the caller's).
__device__ __forceinline__ Staged staged_rotary(const DecodeParams& p) {
  Staged st;
  st.cos = p.cos;
  st.sin = p.sin;
  st.rotary_dim = p.rotary_dim;
  st.table_dtype = p.table_dtype;
  st.neox = p.neox;
  return st;
}
template <int kD>
__device__ __forceinline__ uint16_t* staged_table(const Staged& st, bool sin, int64_t pos) {
  return st.tables + ((sin ? kStagedRows : 0) + (pos - st.pos0)) * kD;
}

// The new keys j in [L - seqlen_new, L) that a CTA's split [n0, n1) holds: [j0, n1) when j0 < n1.
__device__ __forceinline__ int64_t first_new_key(const DecodeParams& p, int64_t L, int64_t n0) {
  const int64_t new0 = L - p.seqlen_new;
  return n0 > new0 ? n0 : new0;
}

// The copies of the new keys' rows: k_new / v_new rows t in [0, seqlen_new) of kv head hk into
// new_rows (a thread per 16-byte chunk). They need no length: issued with Q's loads, at the start.
template <typename T, int kD>
__device__ __noinline__ void stage_new_rows(const T* kn, const T* vn, int64_t kn_row_stride,
                                            int64_t vn_row_stride, int seqlen_new, int head_dim,
                                            uint16_t* rows, int tid, int threads) {
  const int row_vecs = head_dim / 8;
  for (int e = tid; e < seqlen_new * 2 * row_vecs; e += threads) {  // (t, K | V, vec)
    const int vec = e % row_vecs, kv = (e / row_vecs) % 2, t = e / (2 * row_vecs);
    const T* src = kv == 0 ? kn + t * kn_row_stride : vn + t * vn_row_stride;
    cp_async_16(rows + (2 * t + kv) * kD + vec * 8, src + vec * 8, true);
  }
}
// The copies of the rotary tables' rows of the positions [pos0, L) into the last stage's K tile;
// nothing for a sequence that fails the append's rule (it writes nothing and its outputs are NaN).
template <int kD>
__device__ __noinline__ void stage_tables(int64_t L, bool seq_ok, Staged st, int tid, int threads) {
  static_assert(2 * kStagedRows <= tile_shape(kD).block_n, "the tables' rows fit a stage's K tile");
  if (!seq_ok || st.rotary_dim == 0) return;
  const int table_vecs =
      st.rotary_dim / 2 * (st.table_dtype == kTableF32 ? 4 : 2) / 16;  // 16-byte chunks of a row
  for (int e = tid; e < static_cast<int>(L - st.pos0) * 2 * table_vecs; e += threads) {  // (pos, cos | sin, vec)
    const int vec = e % table_vecs, sin = (e / table_vecs) % 2;
    const int64_t pos = st.pos0 + e / (2 * table_vecs);
    const char* src =
        static_cast<const char*>(table_row(st.table_dtype, sin ? st.sin : st.cos, pos, st.rotary_dim / 2));
    cp_async_16(reinterpret_cast<char*>(staged_table<kD>(st, sin, pos)) + vec * 16, src + vec * 16, true);
  }
}

// The staged K rows of the new keys [j0, n1) rotated in place at their positions j, as
// append_kernel.cuh rotates them (rotate_vec_rows: the same bits). NeoX: a thread per pair of
// vectors (c, c + rotary_dim / 16), both read before either is written; interleaved pairs: a
// thread per vector.
template <typename T, int kD>
__device__ __noinline__ void rotate_new_keys(int64_t new0, int64_t n1, int64_t j0, Staged st, int tid,
                                             int threads) {
  const int half = st.rotary_dim / 2, units = st.neox ? half / 8 : st.rotary_dim / 8;
  const int count = static_cast<int>(n1 - j0) * units;
  for (int e = tid; e < count; e += threads) {
    const int c = e % units;
    const int64_t j = j0 + e / units;
    uint16_t* row = st.rows + 2 * (j - new0) * kD;  // K row of key j
    const void* cr = staged_table<kD>(st, false, j);
    const void* sr = staged_table<kD>(st, true, j);
    uint4 a = ptx::lds<uint4>(row + c * 8);
    if (st.neox) {
      uint4 z = ptx::lds<uint4>(row + c * 8 + half);
      const uint4 a0 = a;
      rotate_vec_rows<T, 8, SharedMem>(true, st.table_dtype, half, c * 8, cr, sr, z, a);
      rotate_vec_rows<T, 8, SharedMem>(true, st.table_dtype, half, c * 8 + half, cr, sr, a0, z);
      ptx::sts16(row + c * 8 + half, z);
    } else {
      rotate_vec_rows<T, 8, SharedMem>(false, st.table_dtype, half, c * 8, cr, sr, a, a);
    }
    ptx::sts16(row + c * 8, a);
  }
}

// The fused append's writes (DecodeParams::append_in_kernel), after the loop: the new keys j in
// [L - seqlen_new, L) that this split's keys [n0, n1) hold (the regular splits cover [0, L) once,
// so every new key is written even where no row sees it; the sink split's range holds new keys only
// in a sequence shorter than its sink tokens), from new_rows: K rotated at position j, V bit for
// bit, as append_kernel.cuh writes them; nothing of a sequence that fails the append's rule, no
// write to a page entry or cache row out of range. The CTAs of one split (query-row chunks) write
// the same bytes, and none reads them in this kernel (each took its own copy from new_rows).
// `s` (shared memory) says which keys and where; inlined, so the parameters come from the
// constant bank. A contiguous cache needs no load here; a paged one reads a key's page entry.
template <typename T, int kD, bool kPaged>
__device__ __forceinline__ void store_new_keys(const DecodeParams& p, const NewKeyStores& s, int b, int hk,
                                               const uint16_t* rows, int tid, int threads) {
  constexpr int kVecs = kD / 8;  // 16-byte vectors of a row (head_dim <= kD)
  const int64_t slot0 = s.slot0, k_row0 = s.k_row0, v_row0 = s.v_row0;
  const int first = s.first, count = s.keys * 2 * kVecs;  // (key, K or V, vector)
  // The cache is read-only everywhere else in this kernel (const in DecodeParams); these are the
  // slots the call appends.
  T* const kc = const_cast<T*>(static_cast<const T*>(p.k));
  T* const vc = const_cast<T*>(static_cast<const T*>(p.v));
  for (int e = tid; e < count; e += threads) {
    const int vec = e % kVecs, kv = (e / kVecs) % 2, jj = e / (2 * kVecs);
    if (vec * 8 >= p.head_dim) continue;
    const bool is_k = kv == 0;
    int64_t off;
    if constexpr (kPaged) {
      int64_t block, within;
      slot_place(p, b, slot0 + jj, &block, &within);
      if (block < 0 || block >= p.num_pages) continue;
      off = is_k ? block * p.k_batch_stride + within * p.k_row_stride + int64_t(hk) * p.k_head_stride
                 : block * p.v_batch_stride + within * p.v_row_stride + int64_t(hk) * p.v_head_stride;
    } else {  // consecutive slots of one cache row (its range was checked with s)
      off = is_k ? k_row0 + jj * p.k_row_stride : v_row0 + jj * p.v_row_stride;
    }
    *reinterpret_cast<uint4*>((is_k ? kc : vc) + off + vec * 8) =
        *reinterpret_cast<const uint4*>(rows + (2 * (first + jj) + kv) * kD + vec * 8);
  }
}

// A query's 8 elements from e0 (`v`, of a sequence with seq_ok its append rule) rotated at its
// position pos (L - seqlen_q + i for query i) as append_kernel.cuh's rotate_query rotates them
// (NaN where the rule fails or the position is negative), with the staged table rows and the NeoX
// partner vector `partner` (the kernel shuffles it from the lane holding it). Out of line: its
// table-type and pair-style variants stay out of the kernel's body (inlined, the earlier rotation
// and append code made the plain decode 6 µs slower at 1k, 59 against 53 µs in CUDA-graph replays
// on the H100, though never executed; session 26).
template <typename T, int kD>
__device__ __noinline__ uint4 rotated_query(int64_t pos, bool seq_ok, int e0, uint4 v, uint4 partner,
                                            Staged st) {
  if (!seq_ok || pos < 0) {
    T* el = reinterpret_cast<T*>(&v);
#pragma unroll
    for (int u = 0; u < 8; ++u) el[u] = round_to_dtype<T>(__longlong_as_double(0x7ff8000000000000LL));
  } else if (e0 < st.rotary_dim) {
    rotate_vec_rows<T, 8, SharedMem>(st.neox, st.table_dtype, st.rotary_dim / 2, e0,
                                     staged_table<kD>(st, false, pos), staged_table<kD>(st, true, pos),
                                     partner, v);
  }
  return v;
}

// The rotation's code, run once on scratch data by the CTA's last warp at the kernel's start, so
// that it is in the instruction cache when the real rotation runs. Fetched cold there, behind every
// CTA's tile copies, the code took ~4 µs of a 1k step's prologue for a few dozen instructions of
// arithmetic (docs/perf.md, session 33: a warm-up in warp 0 took rotary only from +4.6 % to
// +2.4 %, but delayed warp 0's staging). `scratch`: the last stage's V tile, which nothing uses
// before the loop. Only the path this call takes (table type, pair style) is fetched. In this
// warp (it stages nothing): rotary only +4.7-5.0 % -> +1.4-1.9 % of a 1k step, append + rotary
// +9.8-10.4 % -> +8.2-8.8 % (CUDA-graph replays, H200; docs/perf.md, session 34).
template <typename T, int kD>
__device__ __noinline__ void warm_rotation(Staged st, uint16_t* scratch, bool keys, int lane) {
  st.rows = scratch;
  st.tables = scratch + 2 * kD;
  st.pos0 = 0;
  if (keys) rotate_new_keys<T, kD>(0, 1, 0, st, lane, 32);
  const uint4 z = make_uint4(0, 0, 0, 0);
  const uint4 r = rotated_query<T, kD>(0, true, 0, z, z, st);
  asm volatile("" ::"r"(r.x), "r"(r.y), "r"(r.z), "r"(r.w));  // keep the call
}

// Scores without softcap or ALiBi: dot · scale (the body's interior tiles; plain_call below).
FLASHLAB_HD bool plain_scores(const DecodeParams& p) { return p.softcap == 0.0f && p.alibi_slopes == nullptr; }

// The kernel's body (decode_tile_kernel below is its __global__): p is the kernel's parameter, or
// a copy with the features of a plain call made compile-time constants.
template <typename T, int kD, bool kPaged, int kRowGroups>
__device__ __forceinline__ void decode_tile_body(const DecodeParams& p) {
  constexpr TileShape kShape = tile_shape(kD);
  constexpr int kWarps = kShape.warps, kBlockN = kShape.block_n, kStages = kShape.stages;
  constexpr int kColSplit = kShape.col_split, kKeyWarps = key_warps(kD, kRowGroups);
  constexpr int kRows = cta_rows(kRowGroups);      // the CTA's query rows
  constexpr int kWarpKeys = kBlockN / kKeyWarps;   // keys of a tile per warp (16; 32 with 2 row groups)
  constexpr int kDw = kD / kColSplit;  // O columns per warp
  constexpr int kThreadsCta = kWarps * 32;
  constexpr int kChunks = kD / 8;                      // 16-byte chunks of a row
  constexpr int kRowsPerPass = kThreadsCta / kChunks;  // tile rows one pass of the CTA copies
  constexpr int kPasses = kBlockN / kRowsPerPass;      // copies of K (and of V) per thread per tile
  // Q's A fragments stay in registers for the whole loop (8 k-steps x 4 at hdim 128); at hdim 256
  // (16 k-steps, 64 registers) they are read from shared memory per tile.
  constexpr bool kQInRegs = kD <= 128;
  static_assert(kWarpKeys % 16 == 0, "a warp's keys are whole k-steps of P·V");
  static_assert(kKeyWarps * kRowGroups * kColSplit == kWarps, "warps = row groups x key warps x column parts");
  static_assert(kRowGroups == 1 || kColSplit == 1, "row groups only where a warp holds all of O's columns");
  static_assert(kWarps % kColSplit == 0 && kDw % 16 == 0, "column parts of 16-column pairs");
  static_assert(kThreadsCta % kChunks == 0 && kBlockN % kRowsPerPass == 0, "copies cover a tile evenly");
  static_assert(kStages >= 2, "a pipeline needs two stages");
  static_assert(kShape.min_blocks * (sizeof(TileSmem<kD, kRowGroups>) + kSmemReservedPerCta) <= kSmemPerSm,
                "min_blocks CTAs fit an SM's shared memory (new_rows_cap)");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  TileSmem<kD, kRowGroups>& sm = *reinterpret_cast<TileSmem<kD, kRowGroups>*>(smem_raw);

  // The combine after splits is launched as this kernel's dependent (decode.cu): it may start now
  // and waits for this kernel's partials.
  FLASHLAB_TL(0);
  ptx::grid_dependents_launch();
  const CtaWork w = cta_work(p, kRows);
  const int split = w.split, b = w.b, hk = w.hk, row0 = w.row0;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;  // the MMA fragment coordinates (see the wrappers)

  // Q's loads go out first, before anything else reads global memory. Issued after the prologue's
  // tile copies (until session 31) they queued behind every CTA's copies (~16 MB at B 32, hdim
  // 128): per-CTA globaltimer marks (H200, 1k, L2 flushed) had Q in shared memory 7.5 µs after the
  // CTA's start, 4.7 µs with this order. The step's time moved less: CUDA-graph replays 0.3-1 %
  // faster at 1k / 4k (docs/perf.md, session 31). A thread holds its chunks raw (the rotation needs
  // the sequence's length) until the smem store after the copies' issue. With an append in this
  // kernel, threads [0, kAppendThreads) rotate the new keys and the others load Q. Where the kernel
  // must wait for an append kernel before its first read (wait_first: Q rotated into the workspace by it, or
  // cache_batch_idx), it waits here.
  constexpr int kAppendThreads = kThreadsCta / 2;
  constexpr int kQChunks = kRows * kChunks;
  constexpr int kQPerThread = (kQChunks + kThreadsCta - kAppendThreads - 1) / (kThreadsCta - kAppendThreads);
  if (p.wait_first) ptx::grid_dependency_wait();
  if ((p.q_rotate || (p.append_in_kernel && p.rotary_dim > 0)) && warp == kWarps - 1)
    warm_rotation<T, kD>(staged_rotary(p), sm.kv.v[kStages - 1], p.append_in_kernel && p.rotary_dim > 0, lane);
  const int q_first = p.append_in_kernel ? tid - kAppendThreads : tid;
  const int q_step = p.append_in_kernel ? kThreadsCta - kAppendThreads : kThreadsCta;
  auto q_row = [&](int e) __attribute__((always_inline)) {  // chunk e's row of q (its query i = rr / group)
    const int rr = row0 + e / kChunks;
    return static_cast<const T*>(p.q) + b * p.q_batch_stride + int64_t(rr / p.group) * p.q_row_stride +
           int64_t(hk * p.group + rr % p.group) * p.q_head_stride;
  };
  auto q_real = [&](int e) __attribute__((always_inline)) {  // inside the rows and head_dim
    return q_first >= 0 && e < kQChunks && row0 + e / kChunks < p.rows && (e % kChunks) * 8 < p.head_dim;
  };
  uint4 qv[kQPerThread];
#pragma unroll
  for (int u = 0; u < kQPerThread; ++u) {
    const int e = q_first + u * q_step;
    qv[u] = q_real(e) ? *reinterpret_cast<const uint4*>(q_row(e) + (e % kChunks) * 8) : make_uint4(0, 0, 0, 0);
  }
  // The fused append's new rows go out beside Q's loads (the comment above stage_new_rows).
  if (p.append_in_kernel)
    stage_new_rows<T, kD>(
        static_cast<const T*>(p.k_new) + b * p.kn_batch_stride + int64_t(hk) * p.kn_head_stride,
        static_cast<const T*>(p.v_new) + b * p.vn_batch_stride + int64_t(hk) * p.vn_head_stride,
        p.kn_row_stride, p.vn_row_stride, p.seqlen_new, p.head_dim, sm.new_rows, tid, kThreadsCta);

  int64_t lp, L, n0, n1;  // this split's keys [n0, n1) of the sequence's L
  bool sinks;             // the sink tokens' split (decode_kernel.cuh, DecodeParams::sink_split)
  split_keys(p, b, split, &lp, &L, &n0, &n1, &sinks);
  const RowMask mask = sequence_mask(p, L);

  // The keys the CTA streams: the union of its rows' visible keys in this split; and the keys every
  // real row sees ([all_lo, all_hi], empty when some real row sees none here): a tile inside it needs
  // no mask (below).
  int64_t k_begin = n1, k_end = n0;
  int all_lo = 0, all_hi = 0x7fffffff;
  for (int r = 0; r < kRows; ++r) {
    const RowKeys rk = row_keys(p, mask, b, hk, row0 + r, n0, n1, sinks);
    if (rk.lo <= rk.hi) {
      if (rk.lo < k_begin) k_begin = rk.lo;
      if (rk.hi + 1 > k_end) k_end = rk.hi + 1;
    }
    if (row0 + r < p.rows) {
      all_lo = max(all_lo, rk.lo);
      all_hi = min(all_hi, rk.hi);
    }
  }
  // Scores without softcap or ALiBi are dot · scale: inside [all_lo, all_hi] a tile takes them
  // without the per-key mask and score chain. Its padding rows (zero queries) then score 0 instead
  // of -inf; they are never stored (merge_and_store writes rows < p.rows only).
  const bool plain = plain_scores(p);
  // warp = (row group, key part, column part), the column part fastest; this warp's 16 rows are its
  // row group's, and this thread's two rows of every C fragment g and g + 8 of them.
  const int col_part = warp % kColSplit, key_part = (warp / kColSplit) % kKeyWarps;
  const int wrow0 = 16 * (warp / (kColSplit * kKeyWarps));
  const RowKeys rows[2] = {row_keys(p, mask, b, hk, row0 + wrow0 + g, n0, n1, sinks),
                           row_keys(p, mask, b, hk, row0 + wrow0 + g + 8, n0, n1, sinks)};
  // Row groups: a warp whose 16 rows are all padding (rows not a multiple of the CTA's) computes nothing.
  const bool warp_idle = row0 + wrow0 >= p.rows;
  const int n_tiles = k_begin < k_end ? static_cast<int>((k_end - k_begin + kBlockN - 1) / kBlockN) : 0;

  // Tile `tile` (keys k_begin + tile · kBlockN ...) -> stage tile % kStages. A thread copies chunk
  // c = tid % kChunks of rows r0 + kRowsPerPass · it (r0 = tid / kChunks): a warp's copies are whole
  // rows. Contiguous: row j of the tile is cache row lp + k_begin + j of the sequence, so the
  // source is a base pointer plus multiples of the row stride. Paged: the row address is computed
  // per key (a page may hold one slot).
  const T* kg = static_cast<const T*>(p.k);
  const T* vg = static_cast<const T*>(p.v);
  const int c = tid % kChunks, r0 = tid / kChunks;
  const bool chunk_in = c * 8 < p.head_dim;
  // Contiguous: this thread's sources for the next tile to load (pass 0) and a pass's step. Both:
  // the rows of that tile the cache holds, counted from this thread's first row (< 2^31, as
  // k_end - k_begin is).
  const T *k_next = kg, *v_next = vg;
  int64_t k_pass = 0, v_pass = 0;
  int rows_next = static_cast<int>(k_end - k_begin) - r0;
  // contiguous: the sequence's cache row (paged: unused)
  const int64_t cache_row = kPaged ? 0 : p.cache_batch_idx != nullptr ? p.cache_batch_idx[b] : b;
  if constexpr (!kPaged) {
    const int64_t block = cache_row;
    const int64_t row = lp + k_begin + r0;
    k_next = kg + block * p.k_batch_stride + row * p.k_row_stride + int64_t(hk) * p.k_head_stride + c * 8;
    v_next = vg + block * p.v_batch_stride + row * p.v_row_stride + int64_t(hk) * p.v_head_stride + c * 8;
    k_pass = kRowsPerPass * p.k_row_stride;
    v_pass = kRowsPerPass * p.v_row_stride;
  }
  // Paged: a row's source is its page's and varies per row (a page may hold one slot). The CTA
  // translates a tile's rows once, thread e < 2 · kBlockN taking (row e % kBlockN, K or V), into
  // sm.kv.off, and a copying thread reads its rows' offsets from there: one table read, division
  // and 64-bit offset per row, not per (row, chunk). Before (each thread translating its own rows,
  // per chunk) the paged kernel ran 2.5x the contiguous kernel's instructions and topped out at
  // 3.0-3.35 TB/s on the H200, 0.75 of contiguous, with shuffled and in-order page tables alike
  // (docs/perf.md, session 28). Tile `tile` goes to slot tile % kStages. The prologue translates
  // tiles 0 .. kStages - 1; loop iteration `tile` stores tile + kStages's offsets (into the slot
  // whose tile was loaded before that iteration's barrier, visible at the next one) from the page
  // entry read an iteration earlier, and reads tile + kStages + 1's: the table read's latency hides
  // behind a tile's work instead of stalling the storing warp. Rows past k_end are not translated
  // (never read).
  static_assert(2 * kBlockN <= kThreadsCta, "a (row, K or V) entry per thread");
  const T* kg_c = kg + int64_t(hk) * p.k_head_stride + c * 8;  // this thread's chunk of kv head hk
  const T* vg_c = vg + int64_t(hk) * p.v_head_stride + c * 8;
  const int entry_row = tid % kBlockN;
  const bool entry_v = tid >= kBlockN, entry_thread = kPaged && tid < 2 * kBlockN;
  int entry_block = 0, entry_within = 0;  // the page entry of this thread's row of the next tile to store
  auto entry_in = [&](int tile) __attribute__((always_inline)) {
    return entry_thread && k_begin + int64_t(tile) * kBlockN + entry_row < k_end;
  };
  auto read_entry = [&](int tile) __attribute__((always_inline)) {
    if (entry_in(tile)) {
      int64_t block, within;
      slot_place(p, b, lp + k_begin + int64_t(tile) * kBlockN + entry_row, &block, &within);
      entry_block = static_cast<int>(block);  // an int32 page-table entry
      entry_within = static_cast<int>(within);  // < page_size (an int)
    }
  };
  auto store_entry = [&](int tile, int slot) __attribute__((always_inline)) {  // slot = tile % kStages
    if (entry_in(tile))
      sm.kv.off[slot][entry_row][entry_v] =
          entry_v ? int64_t(entry_block) * p.v_batch_stride + int64_t(entry_within) * p.v_row_stride
                  : int64_t(entry_block) * p.k_batch_stride + int64_t(entry_within) * p.k_row_stride;
  };
  if constexpr (kPaged) {
#pragma unroll
    for (int s = 0; s <= kStages; ++s) {
      read_entry(s);
      if (s < kStages) store_entry(s, s);
    }
    __syncthreads();
  }
  // Tiles are loaded in order (0, 1, 2, ...): each call moves the sources on by a tile.
  auto load_tile = [&](int stage) __attribute__((always_inline)) {  // the next tile's, tile % kStages
    const T* kp = k_next;
    const T* vp = v_next;
#pragma unroll
    for (int it = 0; it < kPasses; ++it) {
      const int r = r0 + it * kRowsPerPass;
      const bool fill = chunk_in && it * kRowsPerPass < rows_next;
      const T* ks = kg;  // src-size 0 reads nothing; the address is still a valid one
      const T* vs = vg;
      if (fill) {
        if constexpr (kPaged) {
          const longlong2 o = *reinterpret_cast<const longlong2*>(sm.kv.off[stage][r]);
          ks = kg_c + o.x;
          vs = vg_c + o.y;
        } else {
          ks = kp;
          vs = vp;
        }
      }
      if constexpr (!kPaged) {
        kp += k_pass;
        vp += v_pass;
      }
      // r % 8 == r0 % 8 when a pass is a multiple of 8 rows: the swizzle is a constant offset
      const int dst = kRowsPerPass % 8 == 0 ? swizzle<kD>(r0, c) + it * kRowsPerPass * kD : swizzle<kD>(r, c);
      cp_async_16(&sm.kv.k[stage][dst], ks, fill);
      cp_async_16(&sm.kv.v[stage][dst], vs, fill);
    }
    k_next = kp;
    v_next = vp;
    rows_next -= kBlockN;
  };

  // This warp's online softmax over its keys: m, l per row (l summed over the quad at the end);
  // O (this warp's 16 rows x its kDw columns) as kDw / 8 C fragments.
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float o[kDw / 8][4];
#pragma unroll
  for (int n = 0; n < kDw / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[n][e] = 0.0f;

  // After a fused append this kernel is launched as the append's dependent (decode.cu) and runs
  // beside it. The append writes the keys [L - seqlen_new, L) (slots cache_seqlens + t) and, unless
  // q_rotate, the rotated queries (then wait_first: waited for above, before Q's loads); nothing
  // this kernel reads before (cache_seqlens, leftpad, the page table) nor the older keys. So the
  // kernel streams the older keys at once and waits for the append (griddepcontrol.wait:
  // completed, its writes visible) only before it loads the first tile holding a new key,
  // wait_tile. Waiting before any load cost a step at 1k ~9 µs (17 %) in
  // CUDA-graph replays on the H100 (docs/perf.md, session 25). Without a fused append the wait is
  // a no-op.
  const int64_t new0 = L - p.seqlen_new;
  int wait_tile = n_tiles;  // no new key among this CTA's
  if (p.seqlen_new > 0 && new0 < k_end)
    wait_tile = new0 <= k_begin ? 0 : static_cast<int>((new0 - k_begin) / kBlockN);
  auto load_tile_after_append = [&](int tile, int stage) __attribute__((always_inline)) {
    if (tile == wait_tile) ptx::grid_dependency_wait();  // uniform over the CTA
    load_tile(stage);
  };
  // The fused append in this kernel (append_in_kernel: no append kernel ran, the waits are no-ops)
  // and the queries' rotation (q_rotate) work from shared memory (the comment above stage_new_rows):
  // their inputs are staged ahead of the tile copies; threads [0, kAppendThreads) rotate the new
  // keys while the others store the queries (without an append every thread stores queries).
  const bool appends = p.append_in_kernel && tid < kAppendThreads;
  const bool staging = p.append_in_kernel || p.q_rotate;  // uniform over the CTA
  const bool seq_ok = sequence_ok_for(p, L - p.seqlen_new + lp, lp);
  Staged st = staged_rotary(p);
  st.rows = sm.new_rows;
  st.tables = sm.kv.k[kStages - 1];
  {
    // the queries' positions, and the new keys' where this kernel appends them (an append kernel's
    // new keys, seqlen_new > new_rows_cap, come rotated: their tables' rows are not staged)
    const int64_t n_new = p.append_in_kernel ? p.seqlen_new : 0;
    const int64_t n_pos = p.seqlen_q > n_new ? p.seqlen_q : n_new;
    st.pos0 = L > n_pos ? L - n_pos : 0;
  }
  const int64_t j0 = first_new_key(p, L, n0);
  if (staging) {  // one group: the new rows (issued at the start) and the tables' rows
    stage_tables<kD>(L, seq_ok, st, tid, kThreadsCta);
    cp_async_commit();
  }

  // The pipeline: kStages - 1 tiles in flight before the first wait; one group committed per
  // stage (empty past the last tile) so wait_group<kStages - 2> always means "tile `tile` landed".
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < n_tiles) load_tile_after_append(s, s);
    cp_async_commit();
  }
  if (staging) {  // the staged group (the oldest) landed, every thread's
    cp_async_wait<kStages - 1>();
    FLASHLAB_TL(6);
    __syncthreads();
  }
  // Q -> shared memory (its loads went out at the start), rotated where asked, zero past the rows
  // and past head_dim (padding rows score 0 and are masked). One branch: the queries' registers are
  // dead on the append's path (no register is live across its out-of-line call).
  if (appends) {
    if (p.rotary_dim > 0 && seq_ok && j0 < n1) rotate_new_keys<T, kD>(new0, n1, j0, st, tid, kAppendThreads);
  } else {
#pragma unroll
    for (int u = 0; u < kQPerThread; ++u) {
      const int e = q_first + u * q_step;
      if (e < kQChunks) {  // uniform over a warp (kQChunks, q_first's offset and q_step are multiples of 32)
        uint4 v = qv[u];
        if (p.q_rotate) {
          // NeoX: the partner vector, half / 8 chunks away in the same row, from the lane that
          // holds it (a row's kChunks chunks are kChunks consecutive lanes); interleaved: unused.
          const int c = e % kChunks, hc = p.rotary_dim / 16;
          const int src = c < hc ? lane + hc : c < 2 * hc ? lane - hc : lane;
          uint4 partner;
          partner.x = __shfl_sync(0xffffffffu, v.x, src);
          partner.y = __shfl_sync(0xffffffffu, v.y, src);
          partner.z = __shfl_sync(0xffffffffu, v.z, src);
          partner.w = __shfl_sync(0xffffffffu, v.w, src);
          const int64_t pos = L - p.seqlen_q + (row0 + e / kChunks) / p.group;  // query i's position
          if (q_real(e)) v = rotated_query<T, kD>(pos, seq_ok, c * 8, v, partner, st);
        }
        *reinterpret_cast<uint4*>(&sm.q[swizzle<kD>(e / kChunks, e % kChunks)]) = v;
      }
    }
  }
  FLASHLAB_TL(5);
  // The tiles holding new keys (from wait_tile on) get them from new_rows (the copies brought the
  // slots' old contents); a sequence that fails the append's rule stores NaN outputs anyway, and its
  // tiles are left as copied (wait_tile past the last: with the append in this kernel no append
  // kernel ran, so wait_tile's wait has nothing to wait for).
  if (p.append_in_kernel && !seq_ok) wait_tile = n_tiles;
  if (p.append_in_kernel && tid == 0) {  // ints: a CTA's keys lie within one split (< 2^31)
    if (seq_ok) {
      sm.patch[0] = static_cast<int>(new0 - k_begin);
      sm.patch[1] = static_cast<int>(k_end - k_begin);
    }
    // store_new_keys' keys [j0, n1); a contiguous cache row out of range writes nothing
    const bool row_ok = kPaged || (cache_row >= 0 && cache_row < p.batch_cache);
    NewKeyStores& ns = sm.store;
    ns.slot0 = lp + j0;
    ns.k_row0 = cache_row * p.k_batch_stride + ns.slot0 * p.k_row_stride + int64_t(hk) * p.k_head_stride;
    ns.v_row0 = cache_row * p.v_batch_stride + ns.slot0 * p.v_row_stride + int64_t(hk) * p.v_head_stride;
    ns.first = static_cast<int>(j0 - new0);
    ns.keys = seq_ok && row_ok && j0 < n1 ? static_cast<int>(n1 - j0) : 0;
  }
  __syncthreads();  // Q's stores, the rotated new keys, sm.patch and sm.store
  FLASHLAB_TL(1);
  // Q's fragments: matrices (rows 0-7 | 8-15 of the warp's) x (chunk 2kk | 2kk+1) = a0..a3 of k-step kk.
  auto load_q = [&](uint32_t(&a)[4], int kk) __attribute__((always_inline)) {
    ldmatrix_x4(a, &sm.q[swizzle<kD>(wrow0 + (lane % 8) + 8 * ((lane / 8) % 2), 2 * kk + lane / 16)]);
  };
  uint32_t qa[kQInRegs ? kChunks / 2 : 1][4];
  if constexpr (kQInRegs) {
#pragma unroll
    for (int kk = 0; kk < kChunks / 2; ++kk) load_q(qa[kk], kk);
  }
  const int key0 = key_part * kWarpKeys;  // this warp's first key in a tile
  const int col0 = col_part * kDw;         // and its first O column
  // stage = tile % kStages, carried (a modulo by 3 is a multiply-high and more at every use)
  for (int tile = 0, stage = 0; tile < n_tiles; ++tile, stage = stage == kStages - 1 ? 0 : stage + 1) {
    const int load_stage = stage == 0 ? kStages - 1 : stage - 1;  // (tile + kStages - 1) % kStages
    cp_async_wait<kStages - 2>();
    // Everyone's copies of `tile` are visible, and every warp is done with tile - 1, whose stage the
    // next load overwrites.
    __syncthreads();
    if (tile == 0) FLASHLAB_TL(2);
    if (tile + kStages - 1 < n_tiles) load_tile_after_append(tile + kStages - 1, load_stage);
    cp_async_commit();
    if (p.append_in_kernel && tile >= wait_tile) {  // uniform over the CTA: the new keys' rows of this tile
      // rows [lo, hi) of the tile (keys from k_begin: t0 + row) hold new keys; the thread's chunk c
      // of its copy rows r0 + it · kRowsPerPass (load_tile's), K and V
      const int t0 = tile * kBlockN, lo = sm.patch[0] - t0, hi = sm.patch[1] - t0, src0 = t0 - sm.patch[0];
#pragma unroll
      for (int it = 0; it < kPasses; ++it) {
        const int r = r0 + it * kRowsPerPass;
        if (chunk_in && r >= lo && r < hi) {
          const uint16_t* nr = &sm.new_rows[2 * (src0 + r) * kD + c * 8];
          const int d = swizzle<kD>(r, c);
          *reinterpret_cast<uint4*>(&sm.kv.k[stage][d]) = *reinterpret_cast<const uint4*>(nr);
          *reinterpret_cast<uint4*>(&sm.kv.v[stage][d]) = *reinterpret_cast<const uint4*>(nr + kD);
        }
      }
      __syncthreads();
    }
    if constexpr (kPaged) {
      store_entry(tile + kStages, stage);
      read_entry(tile + kStages + 1);
    }
    const uint16_t* ks = sm.kv.k[stage];
    const uint16_t* vs = sm.kv.v[stage];

    if (kRowGroups > 1 && warp_idle) continue;  // uniform per warp; the barrier above is the loop's only one

    // S = Q·Kᵀ: (16 rows, kWarpKeys keys) as kNs 8-key C fragments.
    constexpr int kNs = kWarpKeys / 8;
    float s[kNs][4];
#pragma unroll
    for (int n = 0; n < kNs; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kChunks / 2; ++kk) {  // k-steps of 16 dims = 2 chunks
      uint32_t a_smem[4];
      if constexpr (!kQInRegs) load_q(a_smem, kk);
      const uint32_t(&a)[4] = kQInRegs ? qa[kQInRegs ? kk : 0] : a_smem;
#pragma unroll
      for (int kg = 0; kg < kWarpKeys / 16; ++kg) {
        uint32_t bk[4];
        // K: matrices (keys 0-7, chunk 2kk), (keys 0-7, 2kk+1), (keys 8-15, 2kk), (keys 8-15, 2kk+1)
        // of the warp's 16-key group kg
        ldmatrix_x4(bk, &ks[swizzle<kD>(key0 + 16 * kg + (lane % 8) + 8 * (lane / 16), 2 * kk + (lane / 8) % 2)]);
        mma_16816<T>(s[2 * kg], a, bk[0], bk[1]);
        mma_16816<T>(s[2 * kg + 1], a, bk[2], bk[3]);
      }
    }

    // Mask and modify (by selection: a key a row does not see never enters its softmax), then the
    // online softmax of the two rows. Element (n, e): row g + 8 · (e / 2), key jw + 8n + 2t + e % 2.
    // A tile every real row sees in full, with plain scores, skips the mask (the same for the CTA).
    const int64_t tile_j0 = k_begin + int64_t(tile) * kBlockN;
    const bool interior = plain && tile_j0 >= all_lo && tile_j0 + kBlockN - 1 <= all_hi;
    const int64_t jw = tile_j0 + key0;
    // One branch around the whole fragment, not one per score: with the test inside the element
    // loops ptxas kept the interior flag per element (a predicate bit, BSSY, BRA, BSYNC around each
    // multiply: ncu, session 28).
    if (interior) {
#pragma unroll
      for (int n = 0; n < kNs; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] *= p.scale;
    } else {
#pragma unroll
      for (int n = 0; n < kNs; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const RowKeys& rk = rows[e / 2];
          const int64_t j = jw + 8 * n + 2 * t + (e & 1);
          s[n][e] = (j >= rk.lo && j <= rk.hi)
                        ? score_chain(p, s[n][e], rk.slope, rk.diag, static_cast<int>(j))  // j <= hi < 2^31
                        : -INFINITY;
        }
    }
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = m[h];
#pragma unroll
      for (int n = 0; n < kNs; ++n)
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) mx = fmaxf(mx, s[n][e]);
      mx = common::quad_max(mx);  // a row's keys of an 8-key fragment lie in the 4 lanes of a quad
      alpha[h] = mx == -INFINITY ? 1.0f : common::fast_exp2((m[h] - mx) * kLog2e);  // m = -inf: 0
      const float base = mx == -INFINITY ? 0.0f : mx * kLog2e;  // nothing visible yet: every P is 0
      m[h] = mx;
      l[h] *= alpha[h];
#pragma unroll
      for (int n = 0; n < kNs; ++n)
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          s[n][e] = common::fast_exp2(fmaf(s[n][e], kLog2e, -base));  // -inf -> +0
          l[h] += s[n][e];
        }
    }
    // O's rescale, skipped by the whole warp when no row's maximum moved (alpha 1: most tiles once
    // the maxima settle).
    if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
      for (int n = 0; n < kDw / 8; ++n) {
        o[n][0] *= alpha[0];
        o[n][1] *= alpha[0];
        o[n][2] *= alpha[1];
        o[n][3] *= alpha[1];
      }
    }

    // O += P·V, a k-step per 16 keys: the two S fragments of keys 16kg.. are its A operand
    // (FlashAttention-2's trick).
#pragma unroll
    for (int kg = 0; kg < kWarpKeys / 16; ++kg) {
      const uint32_t pa[4] = {pack2<T>(s[2 * kg][0], s[2 * kg][1]), pack2<T>(s[2 * kg][2], s[2 * kg][3]),
                              pack2<T>(s[2 * kg + 1][0], s[2 * kg + 1][1]),
                              pack2<T>(s[2 * kg + 1][2], s[2 * kg + 1][3])};
#pragma unroll
      for (int nn = 0; nn < kDw / 16; ++nn) {  // 16 dims = two 8-column C fragments
        uint32_t bv[4];
        // V transposed: matrices (keys 0-7 | 8-15) x (chunk 2nn | 2nn+1) = b0, b1 of n-tile 2nn, then 2nn+1
        const int cv = col0 / 8 + 2 * nn + lane / 16;
        ldmatrix_x4_trans(bv, &vs[swizzle<kD>(key0 + 16 * kg + (lane % 8) + 8 * ((lane / 8) % 2), cv)]);
        mma_16816<T>(o[2 * nn], pa, bv[0], bv[1]);
        mma_16816<T>(o[2 * nn + 1], pa, bv[2], bv[3]);
      }
    }
  }

  FLASHLAB_TL(3);
  // The stages become the merge's buffers: no copy may still land in them.
  cp_async_wait<0>();
  __syncthreads();
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] = common::quad_sum(l[h]);
    const int r = key_part * kRows + wrow0 + g + 8 * h;
    if (t == 0 && col0 == 0) {  // the column parts hold the same m and l
      sm.merge.m[r] = m[h];
      sm.merge.l[r] = l[h];
    }
#pragma unroll
    for (int n = 0; n < kDw / 8; ++n)
      *reinterpret_cast<float2*>(&sm.merge.o[r * kD + col0 + 8 * n + 2 * t]) =
          make_float2(o[n][2 * h], o[n][2 * h + 1]);
  }
  __syncthreads();
  if (p.append_in_kernel && tid < kAppendThreads) store_new_keys<T, kD, kPaged>(p, sm.store, b, hk, sm.new_rows, tid, kAppendThreads);
  // A CTA without new keys has not waited yet: no CTA of this kernel completes before the fused
  // append, so what follows on the stream (the combine, the caller's next kernel) sees the cache
  // appended. By now the append has long completed: the wait costs nothing.
  ptx::grid_dependency_wait();
  merge_and_store<T, kD, kKeyWarps, kRows>(p, sm.merge.m, sm.merge.l, sm.merge.o, split, b, hk, row0);
  FLASHLAB_TL(4);
}

// A plain call: no softcap, no ALiBi, no fused append, no rotation of the queries (the rotary
// fields serve only those two). decode.cu launches the tile kernel without their code for it.
FLASHLAB_HD bool plain_call(const DecodeParams& p) {
  return plain_scores(p) && !p.append_in_kernel && !p.q_rotate;
}

// kFeatures = false: the kernel for plain calls (plain_call), whose body sees those fields as
// compile-time zeros and drops their code: the contiguous hdim-128 kernel's SASS 93 -> 38 KB, and
// a 1k step 2.5 % faster (hdim 64: 5 %; H200, docs/perf.md, session 38). The code a CTA runs once
// (the prologue, the merge) is fetched cold by every SM; jumped over, the features' code still
// cost that much.
template <typename T, int kD, bool kPaged, int kRowGroups, bool kFeatures>
__global__ void __launch_bounds__(tile_shape(kD).warps * 32, tile_shape(kD).min_blocks)
    decode_tile_kernel(const __grid_constant__ DecodeParams params) {
  if constexpr (kFeatures) {
    decode_tile_body<T, kD, kPaged, kRowGroups>(params);
  } else {
    DecodeParams p = params;
    p.softcap = 0.0f;
    p.alibi_slopes = nullptr;
    p.append_in_kernel = false;
    p.q_rotate = false;
    p.rotary_dim = 0;
    decode_tile_body<T, kD, kPaged, kRowGroups>(p);
  }
}

}  // namespace decode
}  // namespace flashlab
