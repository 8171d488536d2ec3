// src/cuda/sm80/bwd_score.h — from the recomputed scores and dP to P (for dV) and dS (for dQ, dK).
//
// The backward's score hook: the forward's modifications (mask.h: scale, softcap, ALiBi, interval
// mask) applied to S = Q·Kᵀ, then the softmax backward, all per element and in registers:
//   x   = scale · s                          the raw scaled score
//   s'  = cap · tanh(x / cap)  (softcap)     σ = d s'/dx = sech²(x / cap)   (1 without softcap)
//   s'' = s' − slope · |i + shift − j|       (ALiBi: additive, derivative 1)
//   s'' = −inf outside the row's interval    (mask)
//   P   = exp(s'' − LSE)                     the forward's probabilities, from its LSE
//   Z   = keep / (1 − p) or 0                the forward's dropout multiplier (same Philox words)
//   dV  gets P ∘ Z;   dS = P ∘ (dP ∘ Z − D) ∘ σ   with dP = dO·Vᵀ and D = rowsum(dO ∘ O)
// dS is the gradient with respect to x (the scale is applied to dQ and dK once, at the end),
// exactly the reference's dS_raw (src/cpu/reference_core.cpp). Doing this after both S and dP
// exist means σ is never stored: it is recomputed from x in the same loop.
// A row that sees no key has LSE = −inf; it is read as +inf so that P = 0 (not NaN) and its
// gradients vanish, as the reference's. Rows past the sequence read LSE = +inf and D = 0 too.
#pragma once

#include <cmath>
#include <cstdint>

#include <cute/tensor.hpp>

#include "cuda/sm80/dropout.h"  // Dropout<k>::keep_bits: the forward's keep-mask
#include "cuda/sm80/fragments.h"
#include "cuda/sm80/fwd_params.h"
#include "cuda/sm80/mask.h"
#include "cuda/sm80/tile_scheduler.h"

namespace flashlab {
namespace sm80 {

using namespace cute;

// σ = sech²(x / cap) and cap · tanh(x / cap) from one MUFU.EX2: with e = exp(2|x| / cap) >= 1 and
// r = 1 / (e + 1) in (0, 1/2], tanh = sign(x)(1 − 2r) and sech² = 4r(1 − r). Using |x| keeps both
// at full relative precision (1 − r never cancels); the exponent is clamped to 2^64 as in the
// forward (tanh is 1 in fp32 long before).
__device__ __forceinline__ float softcap_with_grad(float x, float softcap, float* sigma) {
  const float e = fast_exp2(fminf(2.0f * kLog2e * __fdividef(fabsf(x), softcap), 64.0f));
  const float r = __fdividef(1.0f, e + 1.0f);
  *sigma = 4.0f * r * (1.0f - r);
  return copysignf(softcap * (1.0f - 2.0f * r), x);
}

// kMaskedSimple (BwdTileSize::masked_simple): masked blocks without softcap and ALiBi take the
// simple loop too (else the general one).
template <int kBlockM, int kBlockN, bool kMaskedSimple = true>
struct BwdScoreHook {
  const ScoreParams& p;
  const FwdTile& t;
  float slope;  // ALiBi slope of (batch, head); 0 = off

  __device__ BwdScoreHook(const ScoreParams& params, const FwdTile& tile) : p(params), t(tile) {
    slope = p.alibi_slopes ? p.alibi_slopes[t.batch * p.alibi_batch_stride + t.head] : 0.0f;
  }

  // s: (rows, cols) fp32 S = Q·Kᵀ of query block m_block, key block n_block, overwritten with
  // P ∘ Z; dp: the same shape, dO·Vᵀ, overwritten with dS. tScS: coordinates; lse_log2: the
  // thread's rows' LSE · log2(e) (+inf for empty and out-of-range rows); dsum: their D.
  template <typename TensorS, typename TensorC, typename Dropout, int kRows>
  __device__ void p_and_ds(TensorS& s, TensorS& dp, TensorC const& tScS, int m_block, int n_block,
                           bool needs_mask, const float (&lse_log2)[kRows], const float (&dsum)[kRows],
                           Dropout const& dropout) const {
    static_assert(decltype(size<0>(s))::value == kRows, "one LSE and D per accumulator row");
    if (slope == 0.0f && !(p.softcap > 0.0f) && (kMaskedSimple || !needs_mask)) {
      if (needs_mask)
        p_and_ds_simple<true>(s, dp, tScS, m_block, n_block, lse_log2, dsum, dropout);
      else
        p_and_ds_simple<false>(s, dp, tScS, m_block, n_block, lse_log2, dsum, dropout);
      return;
    }
    const int m0 = m_block * kBlockM;
    const int n0 = n_block * kBlockN;
    const RowMask m = sequence_mask(p, t);
    const int shift = static_cast<int>(m.shift);
    // Coordinates are cast to int before any arithmetic: partitioned with the unsigned threadIdx.x
    // they are unsigned, and i + shift - j would wrap where it is negative (mask.h has the story).
    const int j0 = n0 + static_cast<int>(get<1>(tScS(0, 0)));  // columns: j0 + a compile-time offset
    const float keep_scale = dropout.keep_scale();
    const float scale = p.softmax_scale;
    const float softcap = p.softcap;
    CUTE_UNROLL
    for (int r = 0; r < size<0>(s); ++r) {
      const int row = m0 + static_cast<int>(get<0>(tScS(r, 0)));
      const float diag_rel = static_cast<float>(row + shift - j0);  // i + shift - j0
      int lo_rel = 0, hi_rel = kBlockN;
      if (needs_mask) relative_key_bounds(m, row, t.k_len, j0, &lo_rel, &hi_rel);
      const uint32_t keep = dropout.keep_bits(tScS, row, j0);
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); ++c) {
        const int dj = static_cast<int>(get<1>(tScS(r, c))) - static_cast<int>(get<1>(tScS(0, 0)));
        float x = s(r, c) * scale;
        float sigma = 1.0f;
        if (softcap > 0.0f) x = softcap_with_grad(x, softcap, &sigma);
        if (slope != 0.0f) x -= slope * fabsf(diag_rel - static_cast<float>(dj));
        if (needs_mask && (dj < lo_rel || dj > hi_rel)) x = -INFINITY;
        const float prob = fast_exp2(fmaf(x, kLog2e, -lse_log2[r]));
        const bool kept = (keep >> c) & 1u;
        const float dp_z = kept ? dp(r, c) * keep_scale : 0.0f;
        dp(r, c) = prob * (dp_z - dsum[r]) * sigma;
        s(r, c) = kept ? prob * keep_scale : 0.0f;
      }
    }
  }

  // The common cases: no softcap and no ALiBi, a key block every row sees whole (kMask false) or
  // one the mask cuts (kMask: the diagonal blocks of a causal or window mask). Per score one FFMA
  // and one MUFU.EX2 for P, two operations for dS (plus the dropout select when enabled, plus
  // two compares with kMask). Kept apart from the general loop above, behind CTA-uniform
  // branches, so that the general loop's work is not issued predicated-off here (ncu on an
  // H200: 35 % of the issued thread instructions were predicated off and the loop was 2.4x
  // FlashAttention-2's when all lived in one loop; on an H100 at b32 h16 s512 d128 causal, where
  // most blocks are masked, the kernel issued 1.5x FlashAttention-2's instructions while the
  // masked blocks took the general loop).
  template <bool kMask, typename TensorS, typename TensorC, typename Dropout, int kRows>
  __device__ void p_and_ds_simple(TensorS& s, TensorS& dp, TensorC const& tScS, int m_block, int n_block,
                                  const float (&lse_log2)[kRows], const float (&dsum)[kRows],
                                  Dropout const& dropout) const {
    const int j0 = n_block * kBlockN + static_cast<int>(get<1>(tScS(0, 0)));
    const float keep_scale = dropout.keep_scale();
    const float scale_log2 = p.softmax_scale * kLog2e;
    RowMask m;
    if constexpr (kMask) m = sequence_mask(p, t);
    CUTE_UNROLL
    for (int r = 0; r < size<0>(s); ++r) {
      const int row = m_block * kBlockM + static_cast<int>(get<0>(tScS(r, 0)));
      const uint32_t keep = dropout.keep_bits(tScS, row, j0);
      int lo_rel = 0, hi_rel = kBlockN;
      if constexpr (kMask) relative_key_bounds(m, row, t.k_len, j0, &lo_rel, &hi_rel);
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); ++c) {
        float prob = fast_exp2(fmaf(s(r, c), scale_log2, -lse_log2[r]));
        if constexpr (kMask) {
          const int dj = static_cast<int>(get<1>(tScS(r, c))) - static_cast<int>(get<1>(tScS(0, 0)));
          if (dj < lo_rel || dj > hi_rel) prob = 0.0f;
        }
        const bool kept = (keep >> c) & 1u;
        const float dp_z = kept ? dp(r, c) * keep_scale : 0.0f;
        dp(r, c) = prob * (dp_z - dsum[r]);
        s(r, c) = kept ? prob * keep_scale : 0.0f;
      }
    }
  }
};

}  // namespace sm80
}  // namespace flashlab
