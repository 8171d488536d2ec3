// src/cuda/sm90/varlen.h — what the Hopper forward and backward share for packed (cu_seqlens)
// batches: the slice of a TMA tensor that holds one sequence, and the zeroing of the next
// sequence's rows that a boundary tile loaded (design/sm90-forward.md §7, sm90-backward.md §7).
#pragma once

#include <cute/tensor.hpp>

namespace flashlab {
namespace sm90 {

// The (rows, d) slice of a descriptor's (rows, d, heads, batch) tensor holding one sequence from
// its row 0: batch entry `seq` (fixed lengths), or, varlen (the packed tensor as one batch entry),
// the rows from the sequence's first packed row `seq` on. `varlen` is a kernel parameter (the
// forward) or a template flag (the backward's kVarlen kernels): no register either way.
template <typename TmaTensor>
CUTE_DEVICE auto sequence_rows(TmaTensor const& m, int head, int seq, bool varlen) {
  return cute::domain_offset(cute::make_coord(varlen ? seq : 0, cute::_0{}),
                             m(cute::_, cute::_, head, varlen ? 0 : seq));
}

// Rows [valid, kRows) of a (kRows, kHeadDim) 16-bit tile in shared memory set to zero by kThreads
// threads (tid their index), 16 bytes a store: the 128-byte swizzle permutes 16-byte chunks, so
// 8 consecutive head-dim elements stay contiguous. Those rows hold the next sequence's values (TMA
// zero-fills only past the packed tensor); the mask makes P and dS 0 there, but 0 · NaN = NaN.
// The caller then fences (fence_view_async_shared: wgmma reads through the async proxy) and
// synchronizes the threads that read the tile.
template <int kRows, int kHeadDim, int kThreads, typename SmemTile>
CUTE_DEVICE void zero_rows_from(SmemTile s, int valid, int tid) {
  constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
  for (int i = tid; i < (kRows - valid) * kChunks; i += kThreads)
    *reinterpret_cast<uint4*>(&s(valid + i / kChunks, (i % kChunks) * 8)) = make_uint4(0, 0, 0, 0);
}

}  // namespace sm90
}  // namespace flashlab
