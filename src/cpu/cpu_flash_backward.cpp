// src/cpu/cpu_flash_backward.cpp — FlashAttention-2 backward on the CPU.
//
// Per query row i, in natural-log units (docs/algorithm.md derives each line):
//   P  = exp(S − LSE)                recomputed from Q, K and the forward's LSE, never stored
//   Z  = keep / (1 − p)              dropout keep-mask of philox.h (Z = 1 without dropout)
//   dV = (P∘Z)ᵀ·dO     dP = (dO·Vᵀ)∘Z     D = rowsum(dO ∘ O)
//   dS = P ∘ (dP − D) ∘ cap'         cap' = 1 − tanh² (chain rule through softcap; 1 without)
//   dK = scale · dSᵀ·Q               dQ = scale · dS·K
// Attention sinks change nothing above (the forward's LSE includes the sink, so P does too) and add
//   dsink_h = −Σ_{b,i} exp(sink_h − LSE_i) · D_i,
// summed per query block next to D, then over blocks in a fixed order after the passes.
//
// Scheduling. dK/dV want a loop over key blocks outside (each key block owns its rows of dK and dV)
// and dQ wants query blocks outside. FA2 on a GPU keeps key blocks outside and adds dQ with atomics,
// whose order changes from run to run. Here each gradient is computed by the loop order that owns it:
//   pass 1, item = (sequence, kv head, key block): dK, dV accumulate in per-thread fp32 tiles over
//           the query heads of the GQA group and the visible query blocks, in a fixed order;
//   pass 2, item = (sequence, query head, query block): dQ accumulates over the visible key blocks.
// Pass 2 recomputes S and dP (7 block products instead of FA2's 5). In return there are no atomics,
// no dQ partials in memory, and the result is bitwise identical run to run and for any thread
// count. Extra memory: per-thread tiles plus D, one float per query row and head (O(seqlen)).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

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
using gemm::Init;
using simd::kWidth;
using simd::VecF;

// Index of (sequence b, query head h, row i) in the D buffer (laid out like LSE).
struct RowIndex {
  int64_t head_stride, batch_stride;  // fixed lengths: (batch, heads_q, seqlen_q)
  bool varlen;                        // varlen: (heads_q, total_q)
  int64_t operator()(const SeqBounds& sb, int64_t b, int64_t h, int64_t i) const {
    return varlen ? h * head_stride + sb.q_begin + i : b * batch_stride + h * head_stride + i;
  }
};

RowIndex make_row_index(const BwdParams& p, int64_t* rows) {
  RowIndex ri;
  ri.varlen = is_varlen(p);
  if (ri.varlen) {
    ri.head_stride = p.cu_seqlens_q[p.batch];
    ri.batch_stride = 0;
    *rows = p.heads_q * ri.head_stride;
  } else {
    ri.head_stride = p.seqlen_q;
    ri.batch_stride = p.heads_q * p.seqlen_q;
    *rows = p.batch * ri.batch_stride;
  }
  return ri;
}

// LSE in log2 units, ready for P = exp2(s2 − lse2). A row that saw no key (LSE = −inf) gets +inf,
// which makes all its P exactly 0 (instead of NaN from −inf − (−inf)).
float lse_log2(const BwdParams& p, const SeqBounds& sb, int64_t b, int64_t h, int64_t i) {
  const float lse = p.lse[lse_offset(p, p.lse_batch_stride, p.lse_head_stride, b, sb.q_begin, i, h)];
  return lse == simd::kNegInf ? -simd::kNegInf : lse * simd::kLog2e;
}

// ---- the tiles of one thread (fp32, carved from one counted scratch allocation; dp = padded d)
struct Tiles {
  float* tr_a;   // (dp, 64)  transposed operand: pass 1 Kᵀ, pass 2 Qᵀ
  float* tr_b;   // (dp, 64)  transposed operand: pass 1 Vᵀ, pass 2 dOᵀ
  float* nat_a;  // (64, dp)  row-major operand:  pass 1 Q,  pass 2 K;  D: O
  float* nat_b;  // (64, dp)  row-major operand:  pass 1 dO, pass 2 V;  D: dO
  float* s;      // (64, 64)  scores, then P (then P∘Z in pass 1)
  float* ds;     // (64, 64)  dP, then dS
  float* dcap;   // (64, 64)  softcap derivative
  float* acc_a;  // (64, dp)  pass 1 dK, pass 2 dQ
  float* acc_b;  // (64, dp)  pass 1 dV
  float* lse2;   // (64)
  float* dsum;   // (64)      D of the rows of the current query block
  int32_t* lo;   // (64)
  int32_t* hi;   // (64)
  int32_t* sink; // (64)      sink keys [0, sink) of each query row (StreamingLLM sink tokens)
  static constexpr int64_t kB = kBlockQ > kBlockK ? kBlockQ : kBlockK;
  static int64_t floats(int64_t dp) { return 6 * dp * kB + 3 * kB * kB + 5 * kB; }
  static Tiles carve(float* p, int64_t dp) {
    Tiles t;
    for (float** f : {&t.tr_a, &t.tr_b, &t.nat_a, &t.nat_b}) *f = p, p += dp * kB;
    for (float** f : {&t.s, &t.ds, &t.dcap}) *f = p, p += kB * kB;
    for (float** f : {&t.acc_a, &t.acc_b}) *f = p, p += kB * dp;
    t.lse2 = p, p += kB;
    t.dsum = p, p += kB;
    t.lo = reinterpret_cast<int32_t*>(p), p += kB;
    t.hi = reinterpret_cast<int32_t*>(p), p += kB;
    t.sink = reinterpret_cast<int32_t*>(p);
    return t;
  }
};

// ---- D = rowsum(dO ∘ O) for query rows [i0, i0 + nq) of (b, h); with p.dsink, also this block's
// part of dsink_h, −Σ_i exp(sink_h − LSE_i) · D_i, into *dsink_part.
void dsum_item(const BwdParams& p, const RowIndex& ri, float* dsum, int64_t b, int64_t h, int64_t i0,
               const Tiles& t, double* dsink_part) {
  const SeqBounds sb = seq_bounds(p, b);
  const int64_t nq = std::min(kBlockQ, sb.q_len - i0);
  const int64_t d = p.head_dim, dp = flash::padded_head_dim(d);
  flash::load_tile(p.dtype, flash::head_rows(p, p.out, sb, true, b, h).from(i0), nq, d, 1.0f, t.nat_a, dp, nq);
  flash::load_tile(p.dtype, flash::head_rows(p, p.dout, sb, true, b, h).from(i0), nq, d, 1.0f, t.nat_b, dp, nq);
  for (int64_t r = 0; r < nq; ++r) {
    VecF acc{};
    for (int64_t k = 0; k < dp; k += kWidth) acc += simd::load(t.nat_a + r * dp + k) * simd::load(t.nat_b + r * dp + k);
    dsum[ri(sb, b, h, i0 + r)] = simd::reduce_sum(acc);
  }
  if (p.dsink == nullptr) return;
  const double sink = p.sink_logits[h];
  double part = 0.0;
  if (sink != -std::numeric_limits<double>::infinity()) {
    for (int64_t r = 0; r < nq; ++r) {
      const double D = dsum[ri(sb, b, h, i0 + r)];
      const double lse = p.lse[lse_offset(p, p.lse_batch_stride, p.lse_head_stride, b, sb.q_begin, i0 + r, h)];
      if (D != 0.0) part -= std::exp(sink - lse) * D;  // LSE >= sink: no overflow
    }
  }
  *dsink_part = part;
}

// dS = P ∘ (dP∘Z − D) ∘ cap' for one query row r of a tile, keys [j0, j0 + nk); element c of the
// row sits at offset c * k_stride. With dropout, P becomes P∘Z in place (pass 1 needs it for dV).
void row_dscores(float* s, float* ds, const float* dcap, int64_t k_stride, float dsum, int64_t i, int64_t j0,
                 int64_t nk, const flash::Dropout& drop) {
  if (drop.on()) {
    drop.for_row(i, j0, nk, [&](int64_t j, bool keep) {
      const int64_t c = (j - j0) * k_stride;
      const float z = keep ? drop.keep_scale : 0.0f;
      const float pr = s[c];
      ds[c] = pr * (ds[c] * z - dsum) * (dcap ? dcap[c] : 1.0f);
      s[c] = pr * z;
    });
    return;
  }
  for (int64_t c = 0; c < nk; ++c) {
    const int64_t e = c * k_stride;
    ds[e] = s[e] * (ds[e] - dsum) * (dcap ? dcap[e] : 1.0f);
  }
}

// ---- pass 1: dK, dV of keys [j0, j0 + nk) of (b, kv head kvh)
void dkdv_item(const BwdParams& p, const RowIndex& ri, const float* dsum, int64_t b, int64_t kvh, int64_t j0,
               const Tiles& t) {
  const SeqBounds sb = seq_bounds(p, b);
  const int64_t nk = std::min(kBlockK, sb.k_len - j0);
  const int64_t nk_pad = flash::round_up(nk, kWidth);
  const int64_t d = p.head_dim, dp = flash::padded_head_dim(d);
  const int64_t group = p.heads_q / p.heads_kv;
  constexpr int64_t ld = kBlockK;  // of the (query x key) tiles s, ds, dcap

  // Kᵀ serves every query head of the group, so the scale is folded into it only when no head
  // has a score modification.
  const bool fold = p.softcap == 0.0f && p.alibi_slopes == nullptr;
  const float k_scale = fold ? p.softmax_scale * simd::kLog2e : 1.0f;
  flash::load_tile_transposed(p.dtype, flash::head_rows(p, p.k, sb, false, b, kvh).from(j0), nk, d, k_scale,
                              t.tr_a, ld);
  flash::load_tile_transposed(p.dtype, flash::head_rows(p, p.v, sb, false, b, kvh).from(j0), nk, d, 1.0f, t.tr_b,
                              ld);
  std::fill(t.acc_a, t.acc_a + nk * dp, 0.0f);
  std::fill(t.acc_b, t.acc_b + nk * dp, 0.0f);

  for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
    flash::ScoreMod mod = flash::make_score_mod(p, sb, b, h);
    mod.folded = fold;
    const flash::Dropout drop = flash::make_dropout(p, b, h);
    float* dcap = p.softcap > 0.0f ? t.dcap : nullptr;
    const flash::HeadRows q = flash::head_rows(p, p.q, sb, true, b, h);
    const flash::HeadRows dout = flash::head_rows(p, p.dout, sb, true, b, h);
    const int32_t* sink = mod.mask.sink > 0 ? t.sink : nullptr;  // StreamingLLM sink tokens
    for (int64_t i0 = 0; i0 < sb.q_len; i0 += kBlockQ) {
      const int64_t nq = std::min(kBlockQ, sb.q_len - i0);
      int64_t jlo, jhi;
      flash::row_intervals(mod.mask, i0, nq, t.lo, t.hi, &jlo, &jhi);
      // The transpose of the forward's walk: this key block's rows are those whose window reaches
      // it, or whose sink keys do (every row whose right bound reaches a key of a sink block).
      const int64_t sinks = sink ? flash::row_sinks(mod.mask, i0, nq, t.sink) : 0;
      if ((jhi < j0 || jlo > j0 + nk - 1) && sinks <= j0) continue;  // no row of this block sees these keys

      flash::load_tile(p.dtype, q.from(i0), nq, d, 1.0f, t.nat_a, dp, nq);
      flash::load_tile(p.dtype, dout.from(i0), nq, d, 1.0f, t.nat_b, dp, nq);
      if (i0 + kBlockQ < sb.q_len) {  // the next query block arrives while this one is computed
        const int64_t next = std::min(kBlockQ, sb.q_len - (i0 + kBlockQ));
        flash::prefetch_rows(q.from(i0 + kBlockQ), next, d);
        flash::prefetch_rows(dout.from(i0 + kBlockQ), next, d);
      }
      for (int64_t r = 0; r < nq; ++r) {
        t.lse2[r] = lse_log2(p, sb, b, h, i0 + r);
        t.dsum[r] = dsum[ri(sb, b, h, i0 + r)];
      }

      // S (nq x nk_pad) = Q·Kᵀ, then scores and P = exp2(S − LSE2) row by row.
      gemm::matmul<Init::kZero>(nq, nk_pad, d, t.nat_a, dp, 1, t.tr_a, ld, t.s, ld);
      flash::finish_scores(flash::ScoreTile{t.s, ld, 1, i0, j0, nq, nk}, mod, t.lo, t.hi, sink, dcap);
      for (int64_t r = 0; r < nq; ++r) {
        const VecF l2 = simd::splat(t.lse2[r]);
        for (int64_t c = 0; c < nk_pad; c += kWidth)
          simd::store(t.s + r * ld + c, simd::exp2(simd::load(t.s + r * ld + c) - l2));
      }
      // dP (nq x nk_pad) = dO·Vᵀ, then dS (and P∘Z).
      gemm::matmul<Init::kZero>(nq, nk_pad, d, t.nat_b, dp, 1, t.tr_b, ld, t.ds, ld);
      for (int64_t r = 0; r < nq; ++r)
        row_dscores(t.s + r * ld, t.ds + r * ld, dcap ? dcap + r * ld : nullptr, 1, t.dsum[r], i0 + r, j0, nk,
                    drop);

      // dV (nk x dp) += (P∘Z)ᵀ·dO and dK (nk x dp) += dSᵀ·Q; element (key c, query r) at [r * ld + c].
      gemm::matmul<Init::kAccumulate>(nk, dp, nq, t.s, 1, ld, t.nat_b, dp, t.acc_b, dp);
      gemm::matmul<Init::kAccumulate>(nk, dp, nq, t.ds, 1, ld, t.nat_a, dp, t.acc_a, dp);
    }
  }
  flash::store_tile(p.dtype, t.acc_a, dp, nk, d, nullptr, p.softmax_scale,
                    flash::head_rows(p, p.dk, sb, false, b, kvh).from(j0));
  flash::store_tile(p.dtype, t.acc_b, dp, nk, d, nullptr, 1.0f, flash::head_rows(p, p.dv, sb, false, b, kvh).from(j0));
}

// ---- pass 2: dQ of query rows [i0, i0 + nq) of (b, h). Tiles are keys x queries, as in the forward.
void dq_item(const BwdParams& p, const RowIndex& ri, const float* dsum, int64_t b, int64_t h, int64_t i0,
             const Tiles& t) {
  const SeqBounds sb = seq_bounds(p, b);
  const int64_t nq = std::min(kBlockQ, sb.q_len - i0);
  const int64_t nq_pad = flash::round_up(nq, kWidth);
  const int64_t d = p.head_dim, dp = flash::padded_head_dim(d);
  const int64_t kvh = kv_head(p, h);
  constexpr int64_t ld = kBlockQ;  // of the (key x query) tiles s, ds, dcap
  const flash::ScoreMod mod = flash::make_score_mod(p, sb, b, h);
  const flash::Dropout drop = flash::make_dropout(p, b, h);
  float* dcap = p.softcap > 0.0f ? t.dcap : nullptr;

  int64_t jlo, jhi;
  flash::row_intervals(mod.mask, i0, nq, t.lo, t.hi, &jlo, &jhi);
  const int32_t* sink = mod.mask.sink > 0 ? t.sink : nullptr;  // StreamingLLM sink tokens
  const flash::KeyBlocks blocks(jlo, jhi, sink ? flash::row_sinks(mod.mask, i0, nq, t.sink) : 0);
  for (int64_t r = 0; r < nq; ++r) {
    t.lse2[r] = lse_log2(p, sb, b, h, i0 + r);
    t.dsum[r] = dsum[ri(sb, b, h, i0 + r)];
  }
  for (int64_t r = nq; r < nq_pad; ++r) t.lse2[r] = -simd::kNegInf, t.dsum[r] = 0.0f;  // padding: P = 0

  const float q_scale = mod.folded ? p.softmax_scale * simd::kLog2e : 1.0f;
  flash::load_tile_transposed(p.dtype, flash::head_rows(p, p.q, sb, true, b, h).from(i0), nq, d, q_scale, t.tr_a, ld);
  flash::load_tile_transposed(p.dtype, flash::head_rows(p, p.dout, sb, true, b, h).from(i0), nq, d, 1.0f, t.tr_b,
                              ld);
  std::fill(t.acc_a, t.acc_a + nq * dp, 0.0f);

  const flash::HeadRows k = flash::head_rows(p, p.k, sb, false, b, kvh);
  const flash::HeadRows v = flash::head_rows(p, p.v, sb, false, b, kvh);
  for (flash::KeyBlocks::Block kb = blocks.first(); kb.nk > 0; kb = blocks.next(kb)) {
    const int64_t j0 = kb.j0, nk = kb.nk;
    flash::load_tile(p.dtype, k.from(j0), nk, d, 1.0f, t.nat_a, dp, nk);
    flash::load_tile(p.dtype, v.from(j0), nk, d, 1.0f, t.nat_b, dp, nk);
    if (const flash::KeyBlocks::Block next = blocks.next(kb); next.nk > 0) {
      // the next K/V block arrives while this one is computed
      flash::prefetch_rows(k.from(next.j0), next.nk, d);
      flash::prefetch_rows(v.from(next.j0), next.nk, d);
    }

    // Sᵀ (nk x nq_pad) = K·Qᵀ, scores, Pᵀ = exp2(Sᵀ − LSE2) with LSE2 varying along the row.
    gemm::matmul<Init::kZero>(nk, nq_pad, d, t.nat_a, dp, 1, t.tr_a, ld, t.s, ld);
    flash::finish_scores(flash::ScoreTile{t.s, 1, ld, i0, j0, nq, nk}, mod, t.lo, t.hi, sink, dcap);
    for (int64_t c = 0; c < nk; ++c)
      for (int64_t r = 0; r < nq_pad; r += kWidth)
        simd::store(t.s + c * ld + r, simd::exp2(simd::load(t.s + c * ld + r) - simd::load(t.lse2 + r)));
    // dPᵀ (nk x nq_pad) = V·dOᵀ, then dSᵀ.
    gemm::matmul<Init::kZero>(nk, nq_pad, d, t.nat_b, dp, 1, t.tr_b, ld, t.ds, ld);
    for (int64_t r = 0; r < nq; ++r)
      row_dscores(t.s + r, t.ds + r, dcap ? dcap + r : nullptr, ld, t.dsum[r], i0 + r, j0, nk, drop);

    // dQ (nq x dp) += dS (nq x nk) · K (nk x dp); dS(r, c) sits at ds[c * ld + r].
    gemm::matmul<Init::kAccumulate>(nq, dp, nk, t.ds, 1, ld, t.nat_a, dp, t.acc_a, dp);
  }
  flash::store_tile(p.dtype, t.acc_a, dp, nq, d, nullptr, p.softmax_scale,
                    flash::head_rows(p, p.dq, sb, true, b, h).from(i0));
}

}  // namespace

Status cpu_flash_backward(const BwdParams& p) {
  const int64_t q_blocks = flash::ceil_div(p.seqlen_q, kBlockQ);
  const int64_t k_blocks = flash::ceil_div(p.seqlen_k, kBlockK);
  const int64_t q_items = p.batch * p.heads_q * q_blocks;
  const int64_t k_items = p.batch * p.heads_kv * k_blocks;
  if (q_items + k_items == 0) {  // no rows at all (a varlen batch of empty sequences)
    if (p.dsink) std::fill(p.dsink, p.dsink + p.heads_q, 0.0f);  // a sum over no rows
    return Status::Ok();
  }
  const int threads = flash::thread_count(p, std::max(q_items, k_items));
  const int64_t dp = flash::padded_head_dim(p.head_dim);
  const int64_t per_thread = flash::round_up(Tiles::floats(dp), 16);
  int64_t rows = 0;
  const RowIndex ri = make_row_index(p, &rows);
  // Both throw bad_alloc before anything is written; the dispatcher reports kOutOfMemory.
  Scratch<float> scratch(static_cast<size_t>(per_thread * threads));
  Scratch<float> dsum(static_cast<size_t>(std::max<int64_t>(rows, 1)));
  // Per query-block parts of dsink, laid out like the q items: (batch, heads_q, q_blocks).
  std::vector<double> dsink_part(p.dsink ? static_cast<size_t>(q_items) : 0, 0.0);

#pragma omp parallel num_threads(threads)
  {
    const Tiles tiles = Tiles::carve(scratch.data() + per_thread * omp_get_thread_num(), dp);
    // (b, h, query block) -> (item / (heads * blocks), item / blocks % heads, item % blocks)
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < q_items; ++item) {
      const int64_t b = item / (q_blocks * p.heads_q), h = item / q_blocks % p.heads_q;
      const int64_t i0 = item % q_blocks * kBlockQ;
      if (i0 < seq_bounds(p, b).q_len)
        dsum_item(p, ri, dsum.data(), b, h, i0, tiles, p.dsink ? &dsink_part[item] : nullptr);
    }
    // (implicit barrier: D is complete.) Pass 1 in natural order: with a causal mask the first key
    // blocks are seen by the most queries, so the longest items start first.
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < k_items; ++item) {
      const int64_t b = item / (k_blocks * p.heads_kv), kvh = item / k_blocks % p.heads_kv;
      const int64_t j0 = item % k_blocks * kBlockK;
      if (j0 < seq_bounds(p, b).k_len) dkdv_item(p, ri, dsum.data(), b, kvh, j0, tiles);
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < q_items; ++item) {
      const int64_t b = item / (q_blocks * p.heads_q), h = item / q_blocks % p.heads_q;
      const int64_t i0 = (q_blocks - 1 - item % q_blocks) * kBlockQ;  // causal: longest blocks first
      if (i0 < seq_bounds(p, b).q_len) dq_item(p, ri, dsum.data(), b, h, i0, tiles);
    }
  }
  if (p.dsink) {  // blocks of every sequence, in item order: the same sum for any thread count
    for (int64_t h = 0; h < p.heads_q; ++h) {
      double acc = 0.0;
      for (int64_t b = 0; b < p.batch; ++b)
        for (int64_t qb = 0; qb < q_blocks; ++qb) acc += dsink_part[(b * p.heads_q + h) * q_blocks + qb];
      p.dsink[h] = static_cast<float>(acc);
    }
  }
  return Status::Ok();
}

}  // namespace detail
}  // namespace flashlab
