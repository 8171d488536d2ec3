// src/cpu/cpu_flash_tiles.h — what cpu_flash's forward and backward share besides the GEMM:
// tile sizes, moving rows of q/k/v/... between the caller's tensors (any dtype, any strides) and
// padded fp32 tiles, the score modification + mask policy, and the dropout keep-mask.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/problem.h"
#include "cpu/cpu_flash_simd.h"
#include "flashlab/dtype.h"
#include "flashlab/mask.h"
#include "flashlab/params.h"
#include "flashlab/philox.h"

namespace flashlab {
namespace detail {
inline namespace FLASHLAB_CPU_ISA {
namespace flash {

// ---- tile sizes (the one place they are chosen)
// kBlockQ queries x kBlockK keys per step. 64 x 64 keeps the per-thread working set at head_dim 64
// (Qᵀ, K, V, O and the 64x64 score tile: 80 KiB) inside L2 with the streaming K/V panel in L1, and
// makes the score tile's query dimension one 64-float row = exactly the micro-kernel's 4 AVX-512
// vectors. Measured on Zen 4 (benchmarks/cpu_flash_vs_sgemm): 64 x 96 and 64 x 128 are within the
// run-to-run noise (~5%) of 64 x 64, 128 x 64 is no better; 64 x 64 needs the least scratch.
// Both must be multiples of simd::kWidth.
constexpr int64_t kBlockQ = 64;
constexpr int64_t kBlockK = 64;
static_assert(kBlockQ % simd::kWidth == 0 && kBlockK % simd::kWidth == 0, "blocks must be whole vectors");

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
inline int64_t ceil_div(int64_t x, int64_t m) { return (x + m - 1) / m; }
// head_dim padded to whole vectors: tiles carry zeros in the extra columns, so products are exact.
inline int64_t padded_head_dim(int64_t d) { return round_up(d, simd::kWidth); }

// ---- the rows of one (sequence, head) of a tensor
struct HeadRows {
  char* base = nullptr;  // element (row 0, dim 0)
  int64_t row_stride = 0;  // in elements
  int64_t elem_size = 0;
  const void* row(int64_t r) const { return base + r * row_stride * elem_size; }
  void* mut_row(int64_t r) const { return base + r * row_stride * elem_size; }
  HeadRows from(int64_t r0) const { return HeadRows{base + r0 * row_stride * elem_size, row_stride, elem_size}; }
};

template <typename Ref>
HeadRows head_rows(const AttentionConfig& c, const Ref& t, const SeqBounds& sb, bool query_side, int64_t b,
                   int64_t head) {
  const int64_t begin = query_side ? sb.q_begin : sb.k_begin;
  HeadRows h;
  h.elem_size = dtype_size(c.dtype);
  h.row_stride = t.row_stride;
  const int64_t off = elem_offset(c, t.batch_stride, t.row_stride, t.head_stride, b, begin, 0, head);
  h.base = static_cast<char*>(const_cast<void*>(static_cast<const void*>(t.ptr))) + off * h.elem_size;
  return h;
}

// Asks the caches for rows [0, nrows) x [0, d) while the current block is being computed. The rows
// of one head are row_stride apart (heads x head_dim elements), too far apart for the hardware
// prefetchers, so otherwise every K/V tile copy waits on L3. perf on Zen 4, seqlen 2048, hdim 64,
// 8 heads: the K/V tile copies fell from 0.36x to 0.14x of the micro-kernel time.
inline void prefetch_rows(const HeadRows& src, int64_t nrows, int64_t d) {
  const int64_t bytes = d * src.elem_size;
  for (int64_t r = 0; r < nrows; ++r) {
    const char* row = static_cast<const char*>(src.row(r));
    for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b, 0, 3);
  }
}

// ---- element conversion, written branch-free so loops over a row vectorize
// IEEE half -> float: shift exponent+mantissa into place and rescale by 2^(127-15); this is exact
// for normal and subnormal halves alike. Inf/NaN (exponent all ones) get the float exponent.
inline float half_to_float_fast(uint16_t h) {
  const uint32_t em = static_cast<uint32_t>(h & 0x7fffu) << 13;
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t bits = float_to_bits(bits_to_float(em) * 0x1p112f);
  if (em >= 0x0f800000u) bits = em | 0x7f800000u;
  return bits_to_float(bits | sign);
}

template <DType kD>
inline float load_elem(const void* row, int64_t k) {
  if constexpr (kD == DType::kFloat32) {
    return static_cast<const float*>(row)[k];
  } else if constexpr (kD == DType::kBFloat16) {
    return bits_to_float(static_cast<uint32_t>(static_cast<const uint16_t*>(row)[k]) << 16);
  } else {
    return half_to_float_fast(static_cast<const uint16_t*>(row)[k]);
  }
}

// Calls fn.template operator()<kD>() for the runtime dtype: the one place a dtype becomes a type.
template <typename Fn>
void dtype_switch(DType d, Fn&& fn) {
  switch (d) {
    case DType::kFloat16: fn(std::integral_constant<DType, DType::kFloat16>{}); break;
    case DType::kBFloat16: fn(std::integral_constant<DType, DType::kBFloat16>{}); break;
    default: fn(std::integral_constant<DType, DType::kFloat32>{}); break;
  }
}

// tile (rows_pad x ld) = scale * src rows [0, nrows) x [0, d), zeros elsewhere.
inline void load_tile(DType dt, const HeadRows& src, int64_t nrows, int64_t d, float scale, float* tile,
                      int64_t ld, int64_t rows_pad) {
  dtype_switch(dt, [&](auto tag) {
    constexpr DType kD = decltype(tag)::value;
    for (int64_t r = 0; r < nrows; ++r) {
      const void* row = src.row(r);
      float* dst = tile + r * ld;
#pragma omp simd
      for (int64_t k = 0; k < d; ++k) dst[k] = scale * load_elem<kD>(row, k);
      for (int64_t k = d; k < ld; ++k) dst[k] = 0.0f;
    }
  });
  if (rows_pad > nrows) std::memset(tile + nrows * ld, 0, sizeof(float) * (rows_pad - nrows) * ld);
}

// tile (d x ld), transposed: tile[k * ld + r] = scale * src row r, element k; columns r >= nrows
// are zero. Used once per work item (Qᵀ, dOᵀ, Kᵀ, Vᵀ), never per inner step.
inline void load_tile_transposed(DType dt, const HeadRows& src, int64_t nrows, int64_t d, float scale,
                                 float* tile, int64_t ld) {
  for (int64_t k = 0; k < d; ++k)
    for (int64_t r = nrows; r < ld; ++r) tile[k * ld + r] = 0.0f;
  dtype_switch(dt, [&](auto tag) {
    constexpr DType kD = decltype(tag)::value;
    for (int64_t r = 0; r < nrows; ++r) {
      const void* row = src.row(r);
      for (int64_t k = 0; k < d; ++k) tile[k * ld + r] = scale * load_elem<kD>(row, k);
    }
  });
}

template <DType kD>
inline void store_elem(void* row, int64_t k, float x) {
  if constexpr (kD == DType::kFloat32) {
    static_cast<float*>(row)[k] = x;
  } else if constexpr (kD == DType::kBFloat16) {
    static_cast<uint16_t*>(row)[k] = float_to_bf16(x);
  } else {
    static_cast<uint16_t*>(row)[k] = float_to_fp16(x);
  }
}

// dst rows [0, nrows) x [0, d) = scale * row_scale[r] * tile (row_scale may be null), rounded to
// the tensor's dtype (round to nearest even, as dtype.h).
inline void store_tile(DType dt, const float* tile, int64_t ld, int64_t nrows, int64_t d, const float* row_scale,
                       float scale, const HeadRows& dst) {
  dtype_switch(dt, [&](auto tag) {
    constexpr DType kD = decltype(tag)::value;
    for (int64_t r = 0; r < nrows; ++r) {
      const float s = row_scale ? scale * row_scale[r] : scale;
      void* row = dst.mut_row(r);
      for (int64_t k = 0; k < d; ++k) store_elem<kD>(row, k, s * tile[r * ld + k]);
    }
  });
}

// ---- scores: raw q·k -> modified, masked score in log2 units (ready for exp2)
// Every variant goes through flashlab::modify_score (softcap, then ALiBi) and the interval mask of
// mask.h, so cpu_flash cannot disagree with the reference on what a score is.
struct ScoreMod {
  float scale = 1.0f;  // softmax_scale
  float softcap = 0.0f;
  float alibi_slope = 0.0f;
  RowMask mask;
  // The caller folded scale · log2 e into an operand of S, so that only the mask remains to apply.
  // Possible when there is no softcap and no ALiBi: make_score_mod sets it then, and a caller that
  // cannot fold for this head (the backward's pass 1 shares one Kᵀ across a GQA group) clears it.
  bool folded = false;

  bool plain() const { return softcap == 0.0f && alibi_slope == 0.0f; }
  float operator()(float raw, int64_t i, int64_t j) const {
    return modify_score<float>(raw * scale, softcap, alibi_slope, i, j, mask.shift) * simd::kLog2e;
  }
  // d(score) / d(scale * q·k): the chain rule through softcap (ALiBi is additive).
  float derivative(float raw) const {
    if (softcap == 0.0f) return 1.0f;
    const float t = std::tanh(raw * scale / softcap);
    return 1.0f - t * t;
  }
};

inline ScoreMod make_score_mod(const AttentionConfig& c, const SeqBounds& sb, int64_t b, int64_t h) {
  ScoreMod m;
  m.scale = c.softmax_scale;
  m.softcap = c.softcap;
  m.alibi_slope = c.alibi_slopes ? c.alibi_slopes[b * c.alibi_batch_stride + h] : 0.0f;
  m.mask = make_row_mask(c, sb.q_len, sb.k_len);
  m.folded = m.plain();
  return m;
}

// Visible key interval of each of n query rows starting at i0 (lo > hi when none), and the union
// [*jlo, *jhi] over those rows (empty: *jhi < *jlo).
inline void row_intervals(const RowMask& mask, int64_t i0, int64_t n, int32_t* lo, int32_t* hi, int64_t* jlo,
                          int64_t* jhi) {
  *jlo = mask.seqlen_k;
  *jhi = -1;
  for (int64_t r = 0; r < n; ++r) {
    int64_t a, b;
    visible_keys(mask, i0 + r, &a, &b);
    if (b < a) a = 1, b = 0;  // canonical empty interval (fits int32)
    lo[r] = static_cast<int32_t>(a);
    hi[r] = static_cast<int32_t>(b);
    if (b >= a) *jlo = std::min(*jlo, a), *jhi = std::max(*jhi, b);
  }
}

// Sink keys of each of n query rows starting at i0: row r also sees keys [0, s[r]) (sink_keys of
// mask.h, StreamingLLM sink tokens). Returns the largest, 0 when no row has any.
inline int64_t row_sinks(const RowMask& mask, int64_t i0, int64_t n, int32_t* s) {
  int64_t most = 0;
  for (int64_t r = 0; r < n; ++r) {
    const int64_t k = sink_keys(mask, i0 + r);
    s[r] = static_cast<int32_t>(k);
    most = std::max(most, k);
  }
  return most;
}

// ---- the key blocks that a block of query rows visits, in order
// Two key ranges: the sink keys [0, sinks) (the largest of row_sinks) and the union of the rows'
// windows [jlo, jhi] (row_intervals). Each is walked in blocks of up to kBlockK keys from its
// start. Where the two meet or overlap they are walked as one range [0, max(jhi, sinks - 1)], so
// no key is visited twice. Without sink tokens (sinks = 0) the walk is [jlo, jhi] alone. Keys of a
// visited block that a row does not see are masked per element (finish_scores).
struct KeyBlocks {
  struct Block {
    int64_t j0, nk;  // keys [j0, j0 + nk); nk = 0: past the last block
  };
  int64_t lo[2] = {0, 0}, hi[2] = {-1, -1};  // range 0 (the sinks), then range 1; inclusive, empty when hi < lo

  KeyBlocks(int64_t jlo, int64_t jhi, int64_t sinks) {
    lo[1] = jlo, hi[1] = jhi;
    if (sinks <= 0) return;
    if (jhi < jlo) {  // no row's window holds a key: the sinks alone
      lo[1] = 0, hi[1] = sinks - 1;
    } else if (sinks >= jlo) {  // the ranges meet: one
      lo[1] = 0, hi[1] = std::max(jhi, sinks - 1);
    } else {
      hi[0] = sinks - 1;
    }
  }
  Block first() const {
    if (hi[0] >= lo[0]) return at(0, lo[0]);
    return hi[1] >= lo[1] ? at(1, lo[1]) : Block{0, 0};
  }
  Block next(const Block& b) const {
    const int g = b.j0 <= hi[0] ? 0 : 1;  // range 0 ends left of range 1
    const int64_t j = b.j0 + kBlockK;
    if (j <= hi[g]) return at(g, j);
    if (g == 0 && hi[1] >= lo[1]) return at(1, lo[1]);
    return Block{j, 0};
  }

 private:
  Block at(int g, int64_t j0) const { return Block{j0, std::min(kBlockK, hi[g] + 1 - j0)}; }
};

// ---- dropout keep-mask (philox.h): keep(i, j) for query row i and keys [j0, j0 + n)
struct Dropout {
  uint32_t threshold = 0;  // 0: off
  float keep_scale = 1.0f;  // 1 / (1 - p)
  uint64_t seed = 0, offset = 0;
  int64_t batch = 0, heads_q = 0, head = 0;

  bool on() const { return threshold != 0u; }
  // fn(j, keep) for every key j in [j0, j0 + n); one Philox call serves four keys.
  template <typename Fn>
  void for_row(int64_t i, int64_t j0, int64_t n, Fn&& fn) const {
    for (int64_t j = j0; j < j0 + n;) {
      const Philox4 w = dropout_words(seed, offset, batch, heads_q, head, i, j);
      for (; j < j0 + n; ++j) {
        fn(j, w.x[j & 3] >= threshold);
        if ((j & 3) == 3) {
          ++j;
          break;
        }
      }
    }
  }
};

inline Dropout make_dropout(const AttentionConfig& c, int64_t b, int64_t h) {
  Dropout d;
  d.threshold = dropout_threshold(c.dropout_p);
  d.keep_scale = 1.0f / (1.0f - c.dropout_p);
  d.seed = c.dropout_seed;
  d.offset = c.dropout_offset;
  d.batch = b;
  d.heads_q = c.heads_q;
  d.head = h;
  return d;
}

// ---- threads: params.num_threads (0 = all), never more than there are work items.
inline int thread_count(const AttentionConfig& c, int64_t items) {
  const int64_t n = c.num_threads > 0 ? c.num_threads : omp_get_max_threads();
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(n, items)));
}

}  // namespace flash
}  // namespace FLASHLAB_CPU_ISA
}  // namespace detail
}  // namespace flashlab
