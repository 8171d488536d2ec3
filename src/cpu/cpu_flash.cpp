// src/cpu/cpu_flash.cpp — FlashAttention-2 forward on the CPU.
//
// Work item (the "tile scheduler"): one sequence b, one query head h, one block of kBlockQ query
// rows. Items are independent, so OpenMP hands them out dynamically and the result does not depend
// on the thread count. Per item, for each block of kBlockK visible keys (flash::KeyBlocks: the
// rows' window, and before it StreamingLLM's sink keys when they lie left of it):
//
//   Sᵀ = K·Qᵀ                       (keys x queries; Qᵀ is transposed once per item)
//   Sᵀ = mask(modify(Sᵀ)) · log2 e  (softcap, ALiBi, causal/window; log2 units for exp2)
//   m' = max(m, colmax Sᵀ);  P = exp2(Sᵀ - m');  α = exp2(m - m');  l = α·l + colsum P
//   O  = α ∘ O + Pᵀ·V               (dropout zeroes/rescales P here; l keeps the undropped sum)
//
// and at the end O /= l, LSE = (m + log2 l)·ln 2. Why Sᵀ and not S: the softmax statistics of a
// query are then reductions down a column, i.e. plain vector max/add across rows with no
// horizontal shuffles, and K is used in its natural row-major layout (no transposed copy per step).
// An attention sink enters as the initial state m = sink·log2 e, l = 1 (= exp2(sink − m)) instead
// of m = −inf, l = 0: the first block rescales it like any earlier block, and a row without
// visible keys ends with O = 0, LSE = sink.
// Extra memory: per-thread tiles only, O(kBlockQ · head_dim), never seqlen_q x seqlen_k.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "api/backend.h"
#include "common/problem.h"
#include "cpu/cpu_flash_gemm.h"
#include "cpu/cpu_flash_scores.h"
#include "cpu/cpu_flash_simd.h"
#include "cpu/cpu_flash_tiles.h"
#include "cpu/scratch.h"

namespace flashlab {
namespace detail {
namespace {

using flash::kBlockK;
using flash::kBlockQ;
using simd::kWidth;
using simd::VecF;

// One thread's tiles, carved from one counted scratch allocation. dp = padded head_dim.
struct FwdTiles {
  float* qt;        // (dp, kBlockQ)      Qᵀ, pre-scaled
  float* k;         // (kBlockK, dp)
  float* v;         // (kBlockK, dp)
  float* st;        // (kBlockK, kBlockQ) scores, then probabilities (keys x queries)
  float* o;         // (kBlockQ, dp)      unnormalized output
  float* m;         // (kBlockQ)          running max, log2 units
  float* l;         // (kBlockQ)          running sum of exp2(s - m)
  float* alpha;     // (kBlockQ)          rescale of the previous O and l
  int32_t* lo;      // (kBlockQ)          visible keys [lo, hi] per query row
  int32_t* hi;      // (kBlockQ)
  int32_t* sink;    // (kBlockQ)          and sink keys [0, sink) (StreamingLLM sink tokens)

  static int64_t floats(int64_t dp) { return 2 * dp * kBlockQ + 2 * kBlockK * dp + kBlockK * kBlockQ + 6 * kBlockQ; }
  static FwdTiles carve(float* p, int64_t dp) {
    FwdTiles t;
    t.qt = p, p += dp * kBlockQ;
    t.k = p, p += kBlockK * dp;
    t.v = p, p += kBlockK * dp;
    t.st = p, p += kBlockK * kBlockQ;
    t.o = p, p += kBlockQ * dp;
    t.m = p, p += kBlockQ;
    t.l = p, p += kBlockQ;
    t.alpha = p, p += kBlockQ;
    t.lo = reinterpret_cast<int32_t*>(p), p += kBlockQ;
    t.hi = reinterpret_cast<int32_t*>(p), p += kBlockQ;
    t.sink = reinterpret_cast<int32_t*>(p);
    return t;
  }
};

// ---- online softmax over the columns of Sᵀ (one column per query row)
// Turns st into P = exp2(s - m') in place and updates m, l; alpha receives exp2(m - m').
// A column that has seen only masked keys keeps m = -inf; exp2 is then taken relative to 0, which
// yields P = 0 and α = 0 instead of the NaN of (-inf) - (-inf).
void online_softmax(float* st, int64_t nk, int64_t nq_pad, float* m, float* l, float* alpha) {
  const VecF neg_inf = simd::splat(simd::kNegInf);
  for (int64_t i = 0; i < nq_pad; i += kWidth) {
    const VecF m_old = simd::load(m + i);
    VecF m_new = m_old;
    for (int64_t j = 0; j < nk; ++j) m_new = simd::vmax(m_new, simd::load(st + j * kBlockQ + i));
    const VecF m_ref = m_new == neg_inf ? VecF{} : m_new;
    const VecF a = simd::exp2(m_old - m_ref);
    VecF sum{};
    for (int64_t j = 0; j < nk; ++j) {
      const VecF p = simd::exp2(simd::load(st + j * kBlockQ + i) - m_ref);
      simd::store(st + j * kBlockQ + i, p);
      sum += p;
    }
    simd::store(l + i, simd::load(l + i) * a + sum);
    simd::store(m + i, m_new);
    simd::store(alpha + i, a);
  }
}

// Dropout on P after l has been updated: LSE and l belong to the undropped softmax.
void dropout_block(float* st, int64_t i0, int64_t j0, int64_t nk, int64_t nq, const flash::Dropout& drop) {
  for (int64_t r = 0; r < nq; ++r)
    drop.for_row(i0 + r, j0, nk, [&](int64_t j, bool keep) {
      float& x = st[(j - j0) * kBlockQ + r];
      x = keep ? x * drop.keep_scale : 0.0f;
    });
}

// ---- one work item: query rows [i0, i0 + nq) of sequence b, head h
void forward_item(const FwdParams& p, int64_t b, int64_t h, int64_t i0, const FwdTiles& t) {
  const SeqBounds sb = seq_bounds(p, b);
  const int64_t nq = std::min(kBlockQ, sb.q_len - i0);
  const int64_t nq_pad = flash::round_up(nq, kWidth);
  const int64_t d = p.head_dim, dp = flash::padded_head_dim(d);
  const int64_t kvh = kv_head(p, h);
  const flash::ScoreMod mod = flash::make_score_mod(p, sb, b, h);
  const flash::Dropout drop = flash::make_dropout(p, b, h);

  int64_t jlo, jhi;
  flash::row_intervals(mod.mask, i0, nq, t.lo, t.hi, &jlo, &jhi);
  for (int64_t r = nq; r < nq_pad; ++r) t.lo[r] = 1, t.hi[r] = 0;  // padding rows see nothing
  const int32_t* sink = mod.mask.sink > 0 ? t.sink : nullptr;  // StreamingLLM sink tokens
  const flash::KeyBlocks blocks(jlo, jhi, sink ? flash::row_sinks(mod.mask, i0, nq, t.sink) : 0);

  const flash::HeadRows q = flash::head_rows(p, p.q, sb, true, b, h);
  const flash::HeadRows k = flash::head_rows(p, p.k, sb, false, b, kvh);
  const flash::HeadRows v = flash::head_rows(p, p.v, sb, false, b, kvh);
  // Request Q and the first K/V block together, so their misses overlap (see prefetch_rows).
  flash::prefetch_rows(q.from(i0), nq, d);
  if (const flash::KeyBlocks::Block b = blocks.first(); b.nk > 0) {
    flash::prefetch_rows(k.from(b.j0), b.nk, d);
    flash::prefetch_rows(v.from(b.j0), b.nk, d);
  }

  // Plain scores: fold softmax_scale and log2 e into Q once, so Sᵀ comes out ready for exp2.
  const float q_scale = mod.folded ? p.softmax_scale * simd::kLog2e : 1.0f;
  flash::load_tile_transposed(p.dtype, q.from(i0), nq, d, q_scale, t.qt, kBlockQ);
  // Online-softmax state; a sink is the state after one block holding only the sink's score.
  const float sink2 = p.sink_logits ? p.sink_logits[h] * simd::kLog2e : simd::kNegInf;
  std::fill(t.m, t.m + nq_pad, sink2);
  std::fill(t.l, t.l + nq_pad, sink2 == simd::kNegInf ? 0.0f : 1.0f);

  bool first = true;
  for (flash::KeyBlocks::Block kb = blocks.first(); kb.nk > 0; kb = blocks.next(kb)) {
    const int64_t j0 = kb.j0, nk = kb.nk;
    flash::load_tile(p.dtype, k.from(j0), nk, d, 1.0f, t.k, dp, nk);
    flash::load_tile(p.dtype, v.from(j0), nk, d, 1.0f, t.v, dp, nk);
    if (const flash::KeyBlocks::Block next = blocks.next(kb); next.nk > 0) {
      // the next K/V block arrives while this one is computed
      flash::prefetch_rows(k.from(next.j0), next.nk, d);
      flash::prefetch_rows(v.from(next.j0), next.nk, d);
    }

    // Sᵀ (nk x nq_pad) = K (nk x d) · Qᵀ (d x nq_pad)
    gemm::matmul<gemm::Init::kZero>(nk, nq_pad, d, t.k, dp, 1, t.qt, kBlockQ, t.st, kBlockQ);
    flash::finish_scores(flash::ScoreTile{t.st, 1, kBlockQ, i0, j0, nq, nk}, mod, t.lo, t.hi, sink, nullptr);
    online_softmax(t.st, nk, nq_pad, t.m, t.l, t.alpha);
    if (drop.on()) dropout_block(t.st, i0, j0, nk, nq, drop);

    // O (nq x dp) = α ∘ O + P (nq x nk) · V (nk x dp); P(i, j) sits at st[j * kBlockQ + i].
    if (first) {
      gemm::matmul<gemm::Init::kZero>(nq, dp, nk, t.st, 1, kBlockQ, t.v, dp, t.o, dp);
    } else {
      gemm::matmul<gemm::Init::kScaleRows>(nq, dp, nk, t.st, 1, kBlockQ, t.v, dp, t.o, dp, t.alpha);
    }
    first = false;
  }

  // Epilogue: O / l and LSE. A row without visible keys has O = 0 and l = 0, LSE = -inf (or, with
  // a sink, l = 1 and LSE = sink).
  if (first) std::fill(t.o, t.o + nq * dp, 0.0f);
  for (int64_t r = 0; r < nq; ++r) t.alpha[r] = t.l[r] > 0.0f ? 1.0f / t.l[r] : 0.0f;
  const flash::HeadRows out = flash::head_rows(p, p.out, sb, true, b, h);
  flash::store_tile(p.dtype, t.o, dp, nq, d, t.alpha, 1.0f, out.from(i0));
  if (p.lse != nullptr) {
    for (int64_t r = 0; r < nq; ++r) {
      const float lse = t.l[r] > 0.0f ? (t.m[r] + std::log2(t.l[r])) * simd::kLn2 : simd::kNegInf;
      p.lse[lse_offset(p, p.lse_batch_stride, p.lse_head_stride, b, sb.q_begin, i0 + r, h)] = lse;
    }
  }
}

}  // namespace

Status cpu_flash_forward(const FwdParams& p) {
  const int64_t q_blocks = flash::ceil_div(p.seqlen_q, kBlockQ);
  const int64_t items = p.batch * p.heads_q * q_blocks;
  if (items == 0) return Status::Ok();
  const int threads = flash::thread_count(p, items);
  const int64_t per_thread = flash::round_up(FwdTiles::floats(flash::padded_head_dim(p.head_dim)), 16);
  Scratch<float> scratch(static_cast<size_t>(per_thread * threads));  // throws bad_alloc: dispatcher

#pragma omp parallel num_threads(threads)
  {
    const FwdTiles tiles = FwdTiles::carve(scratch.data() + per_thread * omp_get_thread_num(),
                                           flash::padded_head_dim(p.head_dim));
    // Blocks of one (b, h) are handed out last-first: with a causal mask they hold the most keys,
    // so the longest items start early and the dynamic schedule ends balanced.
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < items; ++item) {
      const int64_t qb = q_blocks - 1 - item % q_blocks;
      const int64_t h = (item / q_blocks) % p.heads_q;
      const int64_t b = item / (q_blocks * p.heads_q);
      if (qb * kBlockQ < seq_bounds(p, b).q_len) forward_item(p, b, h, qb * kBlockQ, tiles);
    }
  }
  return Status::Ok();
}

}  // namespace detail
}  // namespace flashlab
