// src/cpu/cpu_flash_scores.h — from raw dot products to scores, for one tile of queries x keys.
//
// This is the one hook between S = Q·Kᵀ and the softmax (STYLE rule 5): the forward and both
// backward passes call finish_scores on their score tile, whichever way round it is stored.
//   folded (no softcap, no ALiBi): the scale was folded into an operand, only the mask is applied,
//     and only on blocks that cut through the visible band;
//   otherwise: s = modify_score(scale * raw) · log2 e, then the mask, element by element;
//     with softcap the backward also wants ds/draw (dcap), taken here from the raw value.
// The mask: each row's key interval of mask.h, plus its sink keys with StreamingLLM sink tokens.
#pragma once

#include <cstdint>

#include "cpu/cpu_flash_simd.h"
#include "cpu/cpu_flash_tiles.h"

namespace flashlab {
namespace detail {
inline namespace FLASHLAB_CPU_ISA {
namespace flash {

// Scores of queries [i0, i0 + nq) x keys [j0, j0 + nk); element (query r, key c) sits at
// s[r * q_stride + c * k_stride]. One of the two strides is 1.
struct ScoreTile {
  float* s;
  int64_t q_stride, k_stride;
  int64_t i0, j0, nq, nk;
};

// fn(element, r, c) over the tile, innermost along the contiguous direction so simple bodies
// vectorize.
template <typename Fn>
void for_each_score(const ScoreTile& t, float* base, Fn&& fn) {
  if (t.k_stride == 1) {
    for (int64_t r = 0; r < t.nq; ++r) {
      float* row = base + r * t.q_stride;
#pragma omp simd
      for (int64_t c = 0; c < t.nk; ++c) fn(row[c], r, c);
    }
  } else {
    for (int64_t c = 0; c < t.nk; ++c) {
      float* col = base + c * t.k_stride;
#pragma omp simd
      for (int64_t r = 0; r < t.nq; ++r) fn(col[r], r, c);
    }
  }
}

// True when every one of the nq rows sees every key of [j0, j0 + nk): the block lies in the row's
// interval, or (sink, may be null) in its sink keys. A block across both when they touch is
// reported as not fully visible: masking it per element is correct, only slower.
inline bool block_fully_visible(const int32_t* lo, const int32_t* hi, const int32_t* sink, int64_t nq, int64_t j0,
                                int64_t nk) {
  for (int64_t r = 0; r < nq; ++r) {
    const bool in_sinks = sink != nullptr && j0 + nk <= sink[r];
    if (!in_sinks && (lo[r] > j0 || hi[r] < j0 + nk - 1)) return false;
  }
  return true;
}

// Turns raw products into masked log2-domain scores (see the file comment). lo/hi: the visible key
// interval of each query row (row_intervals); sink: null without sink tokens, else each row's sink
// keys (row_sinks), visible too. dcap: null, or a tile laid out like t.s that receives
// d(score)/d(scale * raw) (only needed by the backward with softcap).
inline void finish_scores(const ScoreTile& t, const ScoreMod& mod, const int32_t* lo, const int32_t* hi,
                          const int32_t* sink, float* dcap) {
  if (mod.folded) {
    if (block_fully_visible(lo, hi, sink, t.nq, t.j0, t.nk)) return;
    const int32_t j0 = static_cast<int32_t>(t.j0);
    if (sink != nullptr) {
      for_each_score(t, t.s, [&](float& s, int64_t r, int64_t c) {
        s = in_visible_set(j0 + static_cast<int32_t>(c), lo[r], hi[r], sink[r]) ? s : simd::kNegInf;
      });
      return;
    }
    for_each_score(t, t.s, [&](float& s, int64_t r, int64_t c) {
      const int32_t key = j0 + static_cast<int32_t>(c);
      s = (key >= lo[r] && key <= hi[r]) ? s : simd::kNegInf;
    });
    return;
  }
  if (dcap != nullptr) {
    for_each_score(t, dcap, [&](float& g, int64_t r, int64_t c) {
      g = mod.derivative(t.s[r * t.q_stride + c * t.k_stride]);
    });
  }
  for (int64_t r = 0; r < t.nq; ++r) {
    const int64_t sinks = sink != nullptr ? sink[r] : 0;
    for (int64_t c = 0; c < t.nk; ++c) {
      float& s = t.s[r * t.q_stride + c * t.k_stride];
      const int64_t key = t.j0 + c;
      s = in_visible_set<int64_t>(key, lo[r], hi[r], sinks) ? mod(s, t.i0 + r, key) : simd::kNegInf;
    }
  }
}

}  // namespace flash
}  // namespace FLASHLAB_CPU_ISA
}  // namespace detail
}  // namespace flashlab
