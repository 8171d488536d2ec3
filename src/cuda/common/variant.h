// src/cuda/common/variant.h — the score variant: what happens between S = Q·Kᵀ and the softmax,
// for the forward and the backward alike.
//
// Per score, with x the raw product of key j and query row i (i + shift − j: distance to the
// diagonal):
//   x   = scale · s                          the scaled score
//   x'  = cap · tanh(x / cap)  (softcap)     σ = dx'/dx = sech²(x / cap)   (1 without softcap)
//   x'' = x' − slope · |i + shift − j|       (ALiBi: additive, derivative 1)
//   x'' = −inf outside the row's interval    (mask: causal both alignments, window, sequence end)
// The forward feeds x'' to the online softmax (before_softmax). The backward recomputes it from S,
// with σ, and turns it into P and dS (p_and_ds):
//   P   = exp(x'' − LSE)                     the forward's probabilities, from its LSE
//   Z   = keep / (1 − p) or 0                the forward's dropout multiplier (same Philox words)
//   dV gets P ∘ Z;   dS = P ∘ (dP ∘ Z − D) ∘ σ   with dP = dO·Vᵀ and D = rowsum(dO ∘ O)
// dS is the gradient with respect to x (the scale is applied to dQ and dK once, at the end),
// exactly the reference's dS_raw (src/cpu/reference_core.cpp). Both passes use ONE tanh
// (softcap_tanh), so the backward's recomputed P is the forward's to the bit.
//
// Variants are data here, not template flags: the branches are uniform across the CTA, and the
// common case (no softcap, no ALiBi, a key block inside every row's interval) pays one predicate
// per block. The per-element mask is a template flag (kMask), because as a runtime branch nvcc
// if-converted the ~250 mask instructions and issued them predicated-off for every block (ncu/SASS
// on an H200). And cuda_sm90's forward compiles each tile twice (kScoreMods_): with the score
// modifications (softcap, ALiBi, a scale <= 0: score_mods()) and without, for the calls that have
// none. Skipped at run time, that code still cost 3 % (H200, session 38: half the kernel's
// 180 KB of instructions, each tile's walk through them stalled on instruction fetch; docs/perf.md).
//
// Attention sinks: a per-head logit in the softmax denominator, sink_logit(); the forward's
// OnlineSoftmax::finalize takes it, the backward sees it only through the forward's LSE, and its
// gradient dsink_h = −Σ_rows exp(sink_h − LSE)·D is bwd_prepost.h's.
// Hook points for the features still to come (each marked "Hook:" below):
//   FP8 inputs       per-tensor dequantization scales of Q and K folded into the softmax scale:
//                    qk_descale(); of V into the output: v_descale()
// A kernel is templated on its Variant, so a new variant is a new struct with these members.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include <cute/tensor.hpp>

#include "cuda/common/block_range.h"
#include "cuda/common/kernel_args.h"
#include "cuda/common/math.h"
#include "cuda/common/tile_scheduler.h"
#include "flashlab/mask.h"

namespace flashlab {
namespace common {

using namespace cute;

// cap · tanh(x / cap) and σ = sech²(x / cap) from one MUFU.EX2, with the arithmetic a kernel can
// afford (libdevice's branchy tanhf spills the S tile): with e = exp(2|x| / cap) >= 1 and
// r = 1 / (e + 1) in (0, 1/2], tanh = sign(x)(1 − 2r) and sech² = 4r(1 − r). Using |x| keeps both
// at full relative precision (1 − r never cancels). The exponent is clamped to 64: tanh is 1 in
// fp32 long before, and __fdividef needs y < 2^126. The forward drops σ (dead code).
__device__ __forceinline__ float softcap_tanh(float x, float softcap, float* sigma) {
  const float e = fast_exp2(fminf(2.0f * kLog2e * __fdividef(fabsf(x), softcap), 64.0f));
  const float r = __fdividef(1.0f, e + 1.0f);
  *sigma = 4.0f * r * (1.0f - r);
  return copysignf(softcap * (1.0f - 2.0f * r), x);
}

// Whether key j0 + dj lies outside its row's interval [j0 + lo_rel, j0 + hi_rel] (relative_key_bounds).
__device__ __forceinline__ bool key_masked(int dj, int lo_rel, int hi_rel) {
  return dj < lo_rel || dj > hi_rel;
}

// kBlockM × kBlockN: the score tile of the kernel using it. kSinks_: cuda_sm80's backward kernels
// compiled for StreamingLLM sink tokens (p_and_ds's `sinks`); the others' code is untouched by them.
// kScoreMods_ = false: a forward kernel without the score modifications' code in before_softmax,
// launched only for calls without them (!score_mods(params): its softmax takes the scale in the
// exponent, premultiply false).
template <int kBlockM, int kBlockN, bool kSinks_ = false, bool kScoreMods_ = true>
struct ScoreVariant {
  static constexpr bool kSinks = kSinks_;
  static constexpr bool kScoreMods = kScoreMods_;
  using Arguments = ScoreArgs;
  using Params = ScoreArgs;
  static Params to_params(const Arguments& a) { return a; }

  // Uniform values are read from the kernel parameters (constant bank) when needed rather than
  // copied into registers: the S and O accumulators already use most of the 255 a thread has.
  const Params& p;
  const WorkTile& t;
  float slope;  // ALiBi slope of (batch, head); 0 = off
  // Forward: the softmax folds the scale into its exponent (one FFMA) and takes the row max of
  // unscaled scores; valid only for scale > 0 and no nonlinear modification. Otherwise
  // before_softmax scales (premultiply). The backward ignores it (dead code there).
  bool premultiply;

  __device__ ScoreVariant(const Params& params, const WorkTile& tile) : p(params), t(tile) {
    slope = p.alibi_slopes ? p.alibi_slopes[t.batch * p.alibi_batch_stride + t.head] : 0.0f;
    premultiply = score_mods(p);
  }
  // Whether a call modifies the scaled scores before the softmax (softcap, ALiBi) or has a scale
  // the exponent cannot take (<= 0 or NaN): the forward then scales and modifies each score
  // (premultiply); the kernels without kScoreMods must not run it.
  FLASHLAB_HD static bool score_mods(const Params& params) {
    return params.softcap > 0.0f || params.alibi_slopes != nullptr || !(params.softmax_scale > 0.0f);
  }

  // Attention sinks: the logit of this head's sink in natural-log units, −inf when there is none.
  // The forward adds it to the softmax denominator (OnlineSoftmax::finalize); the backward needs
  // nothing else (P = exp(S − LSE) with the sink in LSE; dsink in bwd_prepost.h).
  __device__ float sink_logit() const { return p.sink_logits ? p.sink_logits[t.head] : -INFINITY; }
  // Hook: FP8. Dequantization scales of Q·Kᵀ (folded into the softmax scale) and of V (folded into
  // the output); 1 for 16-bit inputs.
  __device__ float qk_descale() const { return 1.0f; }
  __device__ float v_descale() const { return 1.0f; }

  // ---- Forward.
  // Multiplier c of the softmax exponent 2^(s·c) and the factor from a row max to natural-log LSE.
  __device__ float softmax_scale_log2() const { return premultiply ? kLog2e : p.softmax_scale * kLog2e; }
  __device__ float lse_scale() const { return premultiply ? 1.0f : p.softmax_scale; }

  // x'' of one score without the mask (x = s · scale; dist = i + shift − j as a float: exact up to
  // 2^24 and within 2^-24 relative beyond, which slope · dist tolerates); σ for the backward.
  __device__ __forceinline__ float score_mod(float s, float dist, float* sigma) const {
    float x = s * p.softmax_scale;
    *sigma = 1.0f;
    if (p.softcap > 0.0f) x = softcap_tanh(x, p.softcap, sigma);
    if (slope != 0.0f) x -= slope * fabsf(dist);
    return x;
  }

  // s: (rows, cols) fp32 scores of key block n_block; tScS: the same shape -> (row, col) tile
  // coordinates. kMask: some score of the block may lie outside its row's interval. kSinks
  // (cuda_sm80, a block that may hold StreamingLLM sink keys): a key j < sink_keys(row) is visible
  // too (mask.h, in_visible_set).
  template <bool kMask, bool kSinks = false, typename TensorS, typename TensorC>
  __device__ void before_softmax(TensorS& s, TensorC const& tScS, int n_block) const {
    static_assert(kMask || !kSinks, "a sink block takes the mask");
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
    if (kScoreMods && premultiply) {
      CUTE_UNROLL
      for (int r = 0; r < size<0>(s); ++r) {
        const int i = m0 + static_cast<int>(get<0>(tScS(r, 0)));
        const float diag_rel = static_cast<float>(i + shift - j0);  // i + shift - j0
        CUTE_UNROLL
        for (int c = 0; c < size<1>(s); ++c) {
          const float dj =
              static_cast<float>(static_cast<int>(get<1>(tScS(r, c))) - static_cast<int>(get<1>(tScS(0, 0))));
          float unused_sigma;
          s(r, c) = score_mod(s(r, c), diag_rel - dj, &unused_sigma);
        }
      }
    }
    if constexpr (kMask) {
      // Without a left window a row's first visible key is key 0 (mask.h visible_keys), so no score
      // lies left of its interval: the plain kernels (!kScoreMods: cuda_sm90's forward for calls
      // without softcap or ALiBi) then test the right bound alone, one compare a score fewer.
      // H200, session 39: the causal forward at hdim 64, 512-2k, 2-4 % faster. Not in the long
      // key blocks (kBlockN > 128: 128 x 176 at hdim 128 spilled 8 bytes with both loops).
      if (!kScoreMods && !kSinks && kBlockN <= 128 && m.left < 0) {
        CUTE_UNROLL
        for (int r = 0; r < size<0>(s); ++r) {
          int lo_rel, hi_rel;
          relative_key_bounds(m, m0 + static_cast<int>(get<0>(tScS(r, 0))), t.k_len, j0, &lo_rel, &hi_rel);
          CUTE_UNROLL
          for (int c = 0; c < size<1>(s); ++c) {
            const int dj = static_cast<int>(get<1>(tScS(r, c))) - static_cast<int>(get<1>(tScS(0, 0)));
            if (dj > hi_rel) s(r, c) = -INFINITY;
          }
        }
        return;
      }
      CUTE_UNROLL
      for (int r = 0; r < size<0>(s); ++r) {
        int lo_rel, hi_rel;
        const int row = m0 + static_cast<int>(get<0>(tScS(r, 0)));
        relative_key_bounds(m, row, t.k_len, j0, &lo_rel, &hi_rel);
        const int sink_rel = kSinks ? relative_sink_bound(m, row, j0) : 0;
        CUTE_UNROLL
        for (int c = 0; c < size<1>(s); ++c) {
          const int dj = static_cast<int>(get<1>(tScS(r, c))) - static_cast<int>(get<1>(tScS(0, 0)));
          if (key_masked(dj, lo_rel, hi_rel) && !(kSinks && dj < sink_rel)) s(r, c) = -INFINITY;
        }
      }
    }
  }

  // ---- Backward.
  // s: (rows, cols) fp32 S = Q·Kᵀ of query block m_block, key block n_block, overwritten with
  // P ∘ Z; dp: the same shape, dO·Vᵀ, overwritten with dS. tScS: coordinates; lse_log2: the
  // thread's rows' LSE · log2(e) (+inf for empty and out-of-range rows: P = 0, not NaN); dsum:
  // their D. kMaskedSimple: masked blocks without softcap and ALiBi take the simple loop too
  // (sm80's BwdTileSize::masked_simple says where that was measured faster).
  // sinks (kSinks kernels only; a key block that may hold StreamingLLM sink keys): the general loop
  // with the full mask, whatever needs_mask says. Kernels of their own (cuda_sm80's launch picks
  // them when sink_tokens > 0): in the same kernel, the sink code made ptxas spill in sm80's
  // hdim-64 backward kernels (up to 520 bytes).
  // SinkFlag: cute::false_type (the default; the code without sink tokens, exactly: a runtime
  // `false` that ptxas had to fold changed the register allocation of sm80's large-tile hdim-64
  // kernels and cost 3 %), or bool in kSinks kernels.
  template <bool kMaskedSimple, typename TensorS, typename TensorC, typename Dropout, int kRows,
            typename SinkFlag = cute::false_type>
  __device__ void p_and_ds(TensorS& s, TensorS& dp, TensorC const& tScS, int m_block, int n_block,
                           bool needs_mask, const float (&lse_log2)[kRows], const float (&dsum)[kRows],
                           Dropout const& dropout, SinkFlag sink_block = {}) const {
    static_assert(decltype(size<0>(s))::value == kRows, "one LSE and D per accumulator row");
    constexpr bool kSinkCode = kSinks && std::is_same_v<SinkFlag, bool>;
    bool sinks = false;
    if constexpr (kSinkCode) {
      sinks = sink_block;
      needs_mask = needs_mask || sinks;
    }
    if ((!kSinkCode || !sinks) && slope == 0.0f && !(p.softcap > 0.0f) && (kMaskedSimple || !needs_mask)) {
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
    const int j0 = n0 + static_cast<int>(get<1>(tScS(0, 0)));  // columns: j0 + a compile-time offset
    const float keep_scale = dropout.keep_scale();
    CUTE_UNROLL
    for (int r = 0; r < size<0>(s); ++r) {
      const int row = m0 + static_cast<int>(get<0>(tScS(r, 0)));
      const float diag_rel = static_cast<float>(row + shift - j0);  // i + shift - j0
      int lo_rel = 0, hi_rel = kBlockN;
      if (needs_mask) relative_key_bounds(m, row, t.k_len, j0, &lo_rel, &hi_rel);
      int sink_rel = 0;
      if constexpr (kSinkCode) sink_rel = sinks ? relative_sink_bound(m, row, j0) : 0;
      const uint32_t keep = dropout.keep_bits(tScS, row, j0);
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); ++c) {
        const int dj = static_cast<int>(get<1>(tScS(r, c))) - static_cast<int>(get<1>(tScS(0, 0)));
        float sigma;
        float x = score_mod(s(r, c), diag_rel - static_cast<float>(dj), &sigma);
        if (needs_mask && key_masked(dj, lo_rel, hi_rel) && !(kSinkCode && sinks && dj < sink_rel)) x = -INFINITY;
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
          if (key_masked(dj, lo_rel, hi_rel)) prob = 0.0f;
        }
        const bool kept = (keep >> c) & 1u;
        const float dp_z = kept ? dp(r, c) * keep_scale : 0.0f;
        dp(r, c) = prob * (dp_z - dsum[r]);
        s(r, c) = kept ? prob * keep_scale : 0.0f;
      }
    }
  }

  // ---- Backward, transposed (sm90's backward: Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ, keys as rows). The
  // same P and dS as p_and_ds, without dropout: s, dp are (key rows, query columns); tStS gives
  // their (key, query) tile coordinates. A thread's columns are many queries (16 of a 64 × 64
  // wgmma accumulator), so their LSE · log2(e) and D are read from shared memory: lse_log2 and
  // dsum hold the query block's kBlockM values (+inf and 0 for rows past the sequence).
  // kGeneral: the kernel compiled for softcap / ALiBi and StreamingLLM sink tokens (general(params);
  // sink tokens change the mask only beside a left window); otherwise for none of them.
  // Two kernels, not a branch: with both loops in one kernel its registers spill (ptxas, D 128);
  // for the same reason the general kernel has one loop, masked or not.
  static bool general(const Params& params) {
    return params.alibi_slopes != nullptr || params.softcap > 0.0f || sink_tokens_change_mask(params);
  }
  template <bool kGeneral, typename TensorS, typename TensorC>
  __device__ void p_and_ds_transposed(TensorS& s, TensorS& dp, TensorC const& tStS, int m_block, int n_block,
                                      bool needs_mask, const float* lse_log2, const float* dsum) const {
    if (needs_mask || kGeneral)  // the general kernel: one loop (the mask test is cheap beside softcap)
      p_and_ds_t<true, !kGeneral>(s, dp, tStS, m_block, n_block, lse_log2, dsum);
    else
      p_and_ds_t<false, !kGeneral>(s, dp, tStS, m_block, n_block, lse_log2, dsum);
  }

  // kMask: some score may be masked; kSimple: no softcap and no ALiBi (one FFMA + one MUFU.EX2 for
  // P, two operations for dS). Columns go in pairs (c, c + 1): adjacent queries, one 8-byte load
  // of each of LSE and D serves the thread's rows.
  template <bool kMask, bool kSimple, typename TensorS, typename TensorC>
  __device__ void p_and_ds_t(TensorS& s, TensorS& dp, TensorC const& tStS, int m_block, int n_block,
                             const float* lse_log2, const float* dsum) const {
    constexpr int kRows = decltype(size<0>(s))::value;
    static_assert(decltype(size<1>(s))::value % 2 == 0, "column pairs");
    const int q0 = static_cast<int>(get<1>(tStS(0, 0)));  // the thread's first query in the block
    const int i0 = m_block * kBlockM + q0;
    const float scale_log2 = p.softmax_scale * kLog2e;
    int lo_rel[kRows], hi_rel[kRows];
    float diag_rel[kRows];  // i0 + shift − key: ALiBi's distance is diag_rel + di
    RowMask m;
    if constexpr (kMask || !kSimple) m = sequence_mask(p, t);
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const int key = n_block * kBlockN + static_cast<int>(get<0>(tStS(r, 0)));
      lo_rel[r] = 0, hi_rel[r] = kBlockM;
      if constexpr (kMask) {
        relative_query_bounds<kBlockM>(m, key, t.k_len, i0, &lo_rel[r], &hi_rel[r]);
        // The general kernel (!kSimple) serves StreamingLLM sink tokens too (cuda_sm90's backward):
        // a sink key is seen by every row its right bound reaches, left of the window too
        // (relative_query_bounds' second bound dropped).
        if (!kSimple && key < p.sink_tokens && key < t.k_len) hi_rel[r] = kBlockM;
      }
      diag_rel[r] = kSimple ? 0.0f : static_cast<float>(i0 + static_cast<int>(m.shift) - key);
    }
    CUTE_UNROLL
    for (int c = 0; c < size<1>(s); c += 2) {
      // di: a compile-time offset from q0 (see before_softmax on why not the coordinate itself).
      const int di = static_cast<int>(get<1>(tStS(0, c))) - q0;
      const float2 lse2 = *reinterpret_cast<const float2*>(lse_log2 + q0 + di);
      const float2 d2 = *reinterpret_cast<const float2*>(dsum + q0 + di);
      CUTE_UNROLL
      for (int e = 0; e < 2; ++e) {
        const float lse = e == 0 ? lse2.x : lse2.y;
        const float d = e == 0 ? d2.x : d2.y;
        CUTE_UNROLL
        for (int r = 0; r < kRows; ++r) {
          float sigma = 1.0f, prob;
          if constexpr (kSimple) {
            prob = fast_exp2(fmaf(s(r, c + e), scale_log2, -lse));
          } else {
            const float x = score_mod(s(r, c + e), diag_rel[r] + static_cast<float>(di + e), &sigma);
            prob = fast_exp2(fmaf(x, kLog2e, -lse));
          }
          if constexpr (kMask) {
            if (key_masked(di + e, lo_rel[r], hi_rel[r])) prob = 0.0f;
          }
          dp(r, c + e) = kSimple ? prob * (dp(r, c + e) - d) : prob * (dp(r, c + e) - d) * sigma;
          s(r, c + e) = prob;
        }
      }
    }
  }
};

}  // namespace common
}  // namespace flashlab
