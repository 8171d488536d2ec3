// src/cuda/common/dropout.h — dropout on the probabilities P, with the CPU reference's keep-mask.
//
// The mask is flashlab/philox.h's dropout_words(), called with the same key (seed, offset, batch,
// heads_q, head, row, col) as every other backend, so a kept element here is kept everywhere, bit
// for bit. One Philox call yields the words of 4 adjacent columns; a thread's accumulator holds
// columns in adjacent pairs (2t, 2t + 1 of each n8 tile: both in one group of 4), so one call
// serves two scores. Dropped probabilities become 0 after the row sum was taken (LSE and the
// normalizer belong to the undropped softmax); the 1 / (1 - p) factor is applied to O once, at the
// end (OnlineSoftmax::finalize).
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>

#include "cuda/common/kernel_args.h"
#include "cuda/common/tile_scheduler.h"
#include "flashlab/philox.h"

namespace flashlab {
namespace common {

using namespace cute;

// The keep bits assume a (rows, cols) view of the accumulator whose column mode is (column pair,
// n8 tile): sm80's rowcol_view of an m16n8 accumulator (sm80/fragments.h).
template <bool kEnabled>
struct Dropout;

// Arguments / Params of both specializations.
struct DropoutPiece {
  using Arguments = DropoutArgs;
  using Params = DropoutArgs;
  static Params to_params(const Arguments& a) { return a; }
};

// Dropout off: every score kept, nothing to scale.
template <>
struct Dropout<false> : DropoutPiece {
  __device__ Dropout(const Params&, const WorkTile&, int) {}
  __device__ float keep_scale() const { return 1.0f; }
  template <typename TensorC>
  __device__ uint32_t keep_bits(TensorC const&, int, int) const {
    return 0xffffffffu;
  }
  template <typename TensorP, typename TensorC>
  __device__ void apply(TensorP&, TensorC const&, int, int) const {}
};

template <>
struct Dropout<true> : DropoutPiece {
  uint64_t seed, offset;
  uint32_t threshold;
  float scale;
  int batch, heads_q, head;

  __device__ Dropout(const Params& p, const WorkTile& t, int heads_q_)
      : seed(p.seed),
        offset(p.offset),
        threshold(p.threshold),
        scale(p.keep_scale),
        batch(t.batch),
        heads_q(heads_q_),
        head(t.head) {}

  __device__ float keep_scale() const { return scale; }

  // The keep-mask of one of the thread's rows as bits: bit c is column c of the row in the
  // (rows, cols) view, whose mode 1 is (column pair, n8 tile). tScS: (rows, cols) -> (row, col)
  // tile coordinates; row: sequence position of the row; j0: sequence position of the thread's
  // first column. A rolled loop keeps one Philox chain in flight (unrolled, the 10-round chains
  // of all n8 tiles interleave and spill the accumulators). The forward (apply) and the backward
  // (variant.h, p_and_ds) draw the same bits here.
  template <typename TensorC>
  __device__ uint32_t keep_bits(TensorC const& tScS, int row, int j0) const {
    constexpr int kTiles = decltype(size<1, 1>(tScS))::value;  // n8 tiles per row
    static_assert(decltype(size<1, 0>(tScS))::value == 2, "expects column pairs (2t, 2t + 1) in mode (1, 0)");
    static_assert(2 * kTiles <= 32, "the keep bits of one row fit a 32-bit mask");
    uint32_t keep = 0;
#pragma unroll 1
    for (int n = 0; n < kTiles; ++n) {
      const int col = j0 + (static_cast<int>(get<1>(tScS(0, make_coord(0, n)))) -
                            static_cast<int>(get<1>(tScS(0, 0))));  // even: 2t + 8·tile
      const Philox4 w = dropout_words(seed, offset, batch, heads_q, head, row, col);
      // col % 4 is 0 or 2: pick the pair with selects (an indexed w.x[] would go to local memory).
      const bool high = (col & 2) != 0;
      const uint32_t w0 = high ? w.x[2] : w.x[0];
      const uint32_t w1 = high ? w.x[3] : w.x[1];
      keep |= (uint32_t(w0 >= threshold) | (uint32_t(w1 >= threshold) << 1)) << (2 * n);
    }
    return keep;
  }

  // p: (rows, cols) = ((2, MMA_M), (2, MMA_N)) probabilities, dropped ones set to 0; tPcP: the
  // same shape -> (row, col) tile coordinates. m0, n0: sequence positions of the tile's first row
  // and column. The keep bits come from the rolled loop above; the zeroing is unrolled (P must be
  // indexed with compile-time indices to stay in registers).
  template <typename TensorP, typename TensorC>
  __device__ void apply(TensorP& p, TensorC const& tPcP, int m0, int n0) const {
    const int j0 = n0 + static_cast<int>(get<1>(tPcP(0, 0)));
    CUTE_UNROLL
    for (int r = 0; r < size<0>(p); ++r) {
      const uint32_t keep = keep_bits(tPcP, m0 + static_cast<int>(get<0>(tPcP(r, 0))), j0);
      CUTE_UNROLL
      for (int c = 0; c < size<1>(p); ++c) {
        if (!((keep >> c) & 1u)) p(r, c) = 0.0f;
      }
    }
  }
};

}  // namespace common
}  // namespace flashlab
