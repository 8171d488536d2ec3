// src/cuda/sm80/mask.h — the score hook between S = Q·Kᵀ and the softmax, and block skipping.
//
// Semantics are flashlab/mask.h's, called directly: make_row_mask-style RowMask per sequence,
// visible_keys() per row (an interval [lo, hi] of keys), modify_score() for softcap then ALiBi.
//   KeyBlockRange  CTA level: which key blocks can hold a visible key (the rest are skipped), and
//                  which of those every row sees entirely (those skip the per-element mask).
//   ScoreHook      thread level: applies scale, softcap, ALiBi and the interval mask to the scores
//                  this thread holds. Variants are data here, not template flags: the branches
//                  are uniform across the CTA, and the common case (no softcap, no ALiBi, a key
//                  block inside every row's interval) pays for one predicate per block.
#pragma once

#include <cmath>
#include <cstdint>

#include <cute/tensor.hpp>

#include "cuda/sm80/fragments.h"
#include "cuda/sm80/fwd_params.h"
#include "cuda/sm80/tile_scheduler.h"
#include "flashlab/config.h"
#include "flashlab/mask.h"

namespace flashlab {
namespace sm80 {

using namespace cute;

constexpr float kLog2e = 1.4426950408889634f;

// The interval mask of one sequence, with the shift of its own lengths (varlen: per sequence).
// Host and device (FLASHLAB_HD) here and below: tests/gpu/test_sm80_mask.cu checks them against
// flashlab::key_visible() on the host.
FLASHLAB_HD RowMask sequence_mask(const ScoreParams& p, const FwdTile& t) {
  RowMask m;
  m.seqlen_q = t.q_len;
  m.seqlen_k = t.k_len;
  m.shift = p.bottom_right ? int64_t(t.k_len) - t.q_len : 0;
  m.left = p.window_left;
  m.right = p.window_right;
  return m;
}

// Key blocks [n_min, n_max) hold every key a row of this CTA can see. lo and hi of visible_keys()
// never decrease with the row, so the first and last valid rows bound the whole CTA:
//   union of the intervals  = [lo(first), hi(last)]   -> the blocks to visit
//   every row's interval    ⊇ [lo(last), hi(first)]   -> blocks inside it need no mask
template <int kBlockM, int kBlockN>
struct KeyBlockRange {
  int n_min = 0, n_max = 0;
  int64_t full_lo = 0, full_hi = -1;

  FLASHLAB_HD KeyBlockRange(const ScoreParams& p, const FwdTile& t) {
    const RowMask m = sequence_mask(p, t);
    const int64_t first = int64_t(t.m_block) * kBlockM;
    const int64_t last = (first + kBlockM < t.q_len ? first + kBlockM : t.q_len) - 1;
    int64_t lo_first, hi_first, lo_last, hi_last;
    visible_keys(m, first, &lo_first, &hi_first);
    visible_keys(m, last, &lo_last, &hi_last);
    full_lo = lo_last;
    full_hi = hi_first;
    if (hi_last >= lo_first) {  // else no row of the CTA sees a key (lo >= 0, hi <= k_len - 1)
      n_min = static_cast<int>(lo_first / kBlockN);
      n_max = static_cast<int>((hi_last + kBlockN) / kBlockN);  // ceil((hi_last + 1) / kBlockN)
    }
  }
  FLASHLAB_HD bool empty() const { return n_max <= n_min; }
  FLASHLAB_HD bool needs_mask(int n_block) const {
    const int64_t n0 = int64_t(n_block) * kBlockN;
    return !(n0 >= full_lo && n0 + kBlockN - 1 <= full_hi);
  }
  // The blocks of [n_min, n_max) that need no mask, as one range [unmasked_begin(),
  // unmasked_end()) (possibly empty): the blocks inside [full_lo, full_hi]. The forward runs them
  // in a loop of their own, compiled without the mask code (flash_fwd_kernel.h).
  FLASHLAB_HD int unmasked_begin() const {
    const int64_t b = full_lo <= 0 ? 0 : (full_lo + kBlockN - 1) / kBlockN;  // ceil(full_lo / kBlockN)
    return static_cast<int>(b < n_min ? n_min : b > n_max ? n_max : b);
  }
  FLASHLAB_HD int unmasked_end() const {
    const int64_t e = full_hi < 0 ? 0 : (full_hi + 1) / kBlockN;  // floor((full_hi + 1) / kBlockN)
    const int begin = unmasked_begin();
    return static_cast<int>(e < begin ? begin : e > n_max ? n_max : e);
  }
};

// Row `row`'s visible keys as offsets from column j0: key j0 + dj is visible iff
// lo_rel <= dj <= hi_rel. visible_keys() is clamped into [-1, k_len] first, so the offsets fit
// 32 bits and the per-score test is one compare-and-select (keys >= k_len are never visible).
FLASHLAB_HD void relative_key_bounds(const RowMask& m, int64_t row, int k_len, int j0, int* lo_rel,
                                     int* hi_rel) {
  int64_t lo, hi;
  visible_keys(m, row, &lo, &hi);
  *lo_rel = static_cast<int>(lo < k_len ? lo : k_len) - j0;
  *hi_rel = static_cast<int>(hi > -1 ? hi : -1) - j0;
}

// flashlab::modify_score() (softcap, then ALiBi) for one fp32 score, with the arithmetic a kernel
// can afford: tanh(x) = 1 - 2 / (2^(2x·log2 e) + 1) costs one MUFU.EX2 and one reciprocal
// instead of libdevice's branchy tanhf, whose temporaries alone spill the S tile. Its absolute
// error (~1e-7) is what the softmax sees: cap · tanh(s / cap) moves a score by ~cap · 1e-7.
// `dist` is i + shift - j, the signed distance to the diagonal, as a float: exact up to 2^24 and
// within 2^-24 relative beyond, which slope · dist tolerates.
__device__ __forceinline__ float modify_score_fast(float s, float softcap, float alibi_slope, float dist) {
  if (softcap > 0.0f) {
    // 2x·log2 e clamped to 64: tanh is 1 in fp32 long before, and __fdividef needs y < 2^126.
    const float e = fast_exp2(fminf(2.0f * kLog2e * __fdividef(s, softcap), 64.0f));
    s = softcap * (1.0f - __fdividef(2.0f, e + 1.0f));
  }
  if (alibi_slope != 0.0f) s -= alibi_slope * fabsf(dist);
  return s;
}

template <typename Traits>
struct ScoreHook {
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;

  // Uniform values are read from the kernel parameters (constant bank) when needed rather than
  // copied into registers: the S and O accumulators already use most of the 255 a thread has.
  const ScoreParams& p;
  const FwdTile& t;
  float slope;  // ALiBi slope of (batch, head); 0 = off
  // The softmax folds the scale into its exponent (one FFMA) and takes the row max of unscaled
  // scores: valid only for scale > 0 and no nonlinear modification. Otherwise scale here.
  bool premultiply;

  __device__ ScoreHook(const ScoreParams& params, const FwdTile& tile) : p(params), t(tile) {
    slope = p.alibi_slopes ? p.alibi_slopes[t.batch * p.alibi_batch_stride + t.head] : 0.0f;
    premultiply = p.softcap > 0.0f || p.alibi_slopes != nullptr || !(p.softmax_scale > 0.0f);
  }

  // Multiplier c of the softmax exponent 2^(s·c) and the factor from a row max to natural-log LSE.
  __device__ float softmax_scale_log2() const { return premultiply ? kLog2e : p.softmax_scale * kLog2e; }
  __device__ float lse_scale() const { return premultiply ? 1.0f : p.softmax_scale; }

  // s: (rows, cols) fp32 scores of key block n_block; tScS: the same shape -> (row, col) tile
  // coordinates. kMask: some score of the block may lie outside its row's interval (a template
  // flag, not a runtime one: as a runtime branch nvcc if-converted the ~250 mask instructions and
  // issued them predicated-off for every block — ncu/SASS on an H200).
  template <bool kMask, typename TensorS, typename TensorC>
  __device__ void before_softmax(TensorS& s, TensorC const& tScS, int n_block) const {
    const int m0 = t.m_block * kBlockM;
    const int n0 = n_block * kBlockN;
    const RowMask m = sequence_mask(p, t);
    const int shift = static_cast<int>(m.shift);  // |shift| < 2^30 (supports() caps seqlen)
    // Columns as j0 + dj: j0 is this thread's first column, dj a compile-time constant per score
    // (computing each j from the coordinate tensor instead keeps ~64 loop-invariant column indices
    // alive across the key loop and spills the S tile).
    // The coordinates are cast to int before any arithmetic: a tensor partitioned with an unsigned
    // thread index (threadIdx.x) has unsigned coordinates, and i + shift - j0 < 0 would wrap (found
    // on the H100: ALiBi distances of 2^32).
    const int j0 = n0 + static_cast<int>(get<1>(tScS(0, 0)));
    if (premultiply) {
      CUTE_UNROLL
      for (int r = 0; r < size<0>(s); ++r) {
        const int i = m0 + static_cast<int>(get<0>(tScS(r, 0)));
        const float diag_rel = static_cast<float>(i + shift - j0);  // i + shift - j0
        CUTE_UNROLL
        for (int c = 0; c < size<1>(s); ++c) {
          const float dj = static_cast<float>(static_cast<int>(get<1>(tScS(r, c))) - static_cast<int>(get<1>(tScS(0, 0))));
          s(r, c) = modify_score_fast(s(r, c) * p.softmax_scale, p.softcap, slope, diag_rel - dj);
        }
      }
    }
    if constexpr (kMask) {
      CUTE_UNROLL
      for (int r = 0; r < size<0>(s); ++r) {
        int lo_rel, hi_rel;
        relative_key_bounds(m, m0 + static_cast<int>(get<0>(tScS(r, 0))), t.k_len, j0, &lo_rel, &hi_rel);
        CUTE_UNROLL
        for (int c = 0; c < size<1>(s); ++c) {
          const int dj = static_cast<int>(get<1>(tScS(r, c))) - static_cast<int>(get<1>(tScS(0, 0)));
          if (dj < lo_rel || dj > hi_rel) s(r, c) = -INFINITY;
        }
      }
    }
  }
};

}  // namespace sm80
}  // namespace flashlab
