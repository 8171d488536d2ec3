// src/cuda/common/block_range.h — which key blocks a query block visits, and the reverse.
//
// Semantics are flashlab/mask.h's, called directly: a RowMask per sequence, visible_keys() per
// row (an interval [lo, hi] of keys).
//   KeyBlockRange    CTA level (forward, deterministic dQ): the key blocks that can hold a visible
//                    key (the rest are skipped), and those every row sees entirely (they skip the
//                    per-element mask).
//   QueryBlockRange  the transpose (backward main kernel): the query blocks that hold a row seeing
//                    at least one key of a key block. Per (query block, key block) pair,
//                    KeyBlockRange::needs_mask() still says whether the per-element mask is needed
//                    (the criterion is symmetric: every row of the query block sees every key of
//                    the key block).
// Host and device (FLASHLAB_HD): tests/gpu/test_sm80_mask.cu and test_sm80_bwd_mask.cu check them
// against flashlab::key_visible() on the host.
#pragma once

#include <cstdint>

#include "cuda/common/kernel_args.h"
#include "cuda/common/tile_scheduler.h"
#include "flashlab/config.h"
#include "flashlab/mask.h"

namespace flashlab {
namespace common {

// The interval mask of one sequence, with the shift of its own lengths (varlen: per sequence).
FLASHLAB_HD RowMask sequence_mask(const ScoreArgs& p, const WorkTile& t) {
  RowMask m;
  m.seqlen_q = t.q_len;
  m.seqlen_k = t.k_len;
  m.shift = p.bottom_right ? int64_t(t.k_len) - t.q_len : 0;
  m.left = p.window_left;
  m.right = p.window_right;
  m.sink = p.sink_tokens;
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

  FLASHLAB_HD KeyBlockRange(const ScoreArgs& p, const WorkTile& t) {
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
  // StreamingLLM sink tokens (cuda_sm80's kernels; mask.h, sink_keys): the key blocks
  // [0, sink_end) that may hold a sink key of a row of this query block. s_i never decreases with
  // the row, so the last row bounds them. A kernel visits them with the full mask (ScoreVariant's
  // kSinks) and the window's blocks from max(n_min, sink_end) on: no block twice. 0 without sink
  // tokens. Not a member computed in the constructor: the sm90 kernels never pay for it.
  FLASHLAB_HD static int sink_end(const ScoreArgs& p, const WorkTile& t) {
    if (p.sink_tokens <= 0 || t.q_len <= 0) return 0;
    const int64_t first = int64_t(t.m_block) * kBlockM;
    const int64_t last = (first + kBlockM < t.q_len ? first + kBlockM : t.q_len) - 1;
    const int64_t s = sink_keys(sequence_mask(p, t), last);
    return static_cast<int>((s + kBlockN - 1) / kBlockN);
  }
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

// The key blocks a query tile visits with StreamingLLM sink tokens (cuda_sm90's forward kSinks
// kernel; cuda_sm80's forward spells the same walk in its loops, with the exact sink_end), last to
// first: the window's [lo, n_max) with lo = max(n_min, sink_end), then the sink blocks
// [0, sink_end). next() steps down and jumps the gap between the two ranges; -1 past block 0. No
// block twice. sink_end here bounds the last row's s = min(sink, lo, hi + 1) by min(sink, lo,
// k_len) (hi + 1 <= k_len), from what KeyBlockRange holds: sink_keys' 64-bit arithmetic beside
// KeyBlockRange's made the producer (24 registers) spill. Where the bound is loose (a row's right
// bound left of the sink tokens) a block more is visited, masked per element.
template <int kBlockM, int kBlockN>
struct SinkKeyBlockWalk {
  int sink_end = 0, lo = 0, first = -1;
  SinkKeyBlockWalk() = default;
  FLASHLAB_HD SinkKeyBlockWalk(const ScoreArgs& p, const WorkTile& t, const KeyBlockRange<kBlockM, kBlockN>& r) {
    int64_t s = p.sink_tokens > 0 ? p.sink_tokens : 0;
    if (r.full_lo < s) s = r.full_lo;  // the last row's lo
    if (t.k_len < s) s = t.k_len;
    sink_end = static_cast<int>((s + kBlockN - 1) / kBlockN);
    lo = r.n_min > sink_end ? r.n_min : sink_end;
    first = r.n_max > lo ? r.n_max - 1 : sink_end - 1;
  }
  FLASHLAB_HD bool empty() const { return first < 0; }
  FLASHLAB_HD int next(int n) const { return n - 1 < lo && n - 1 >= sink_end ? sink_end - 1 : n - 1; }
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

// Row `row`'s sink keys as an offset from column j0: key j0 + dj is a sink key of the row iff
// dj < sink_rel (mask.h, sink_keys; <= seqlen_k, so it fits 32 bits).
FLASHLAB_HD int relative_sink_bound(const RowMask& m, int64_t row, int j0) {
  return static_cast<int>(sink_keys(m, row)) - j0;
}

// The transpose of relative_key_bounds, for a kernel whose score tile has keys as rows (sm90's
// backward, Sᵀ = K·Qᵀ): the query rows that see key `key`, as offsets from row i0 — row i0 + di
// sees it iff lo_rel <= di <= hi_rel. From visible_keys(): row i sees key j iff j < seqlen_k and
// i + shift − left <= j <= i + shift + right (a bound of −1 is absent), i.e.
//   j − shift − right <= i <= j − shift + left.
// Clamped into [−1, kSpan] (kSpan: the rows of the tile), so a key no row sees gives an empty
// interval and the per-score test stays key_masked()'s two compares.
template <int kSpan>
FLASHLAB_HD void relative_query_bounds(const RowMask& m, int key, int k_len, int i0, int* lo_rel, int* hi_rel) {
  int64_t lo = -1, hi = kSpan;  // relative to i0
  if (key >= k_len) {
    lo = 0, hi = -1;
  } else {
    if (m.right >= 0) lo = key - m.shift - m.right - i0;
    if (m.left >= 0) hi = key - m.shift + m.left - i0;
  }
  *lo_rel = static_cast<int>(lo < -1 ? -1 : lo > kSpan ? kSpan : lo);
  *hi_rel = static_cast<int>(hi < -1 ? -1 : hi > kSpan ? kSpan : hi);
}
// Query blocks [m_min, m_max) hold every row that sees a key of key block n_block. Row i sees
// [lo(i), hi(i)]; lo and hi never decrease with i, and for a window/causal mask both are clamped
// forms of i + shift ∓ w, so:
//   rows with hi(i) >= n0 (first key)  are i >= n0 - shift - right   (all rows when right = -1)
//   rows with lo(i) <= n1 (last key)   are i <= n1 + left - shift    (all rows when left = -1)
// and a row in both sets sees a key of the block: its interval is nonempty (lo <= n1 <= k_len - 1
// and hi >= n0 >= 0 exclude the two ways the clamping can empty it) and overlaps [n0, n1].
//
// StreamingLLM sink tokens (sinks: the caller serves them; cuda_sm80's sink kernels, cuda_sm90's
// general kernels): a key block holding a possible sink key (n0 < sink_tokens) is seen by every row
// whose right bound reaches it, left window or not. Row i with hi(i) >= n0 sees a window key of the
// block when lo(i) <= n1, and otherwise key n0 as a sink: s_i = min(sink, lo(i), hi(i) + 1) > n0.
// Rows with hi(i) < n0 see no key of it (s_i <= hi(i) + 1). So the block's rows run from the first
// such row to the sequence's end: the second bound is dropped. Such a block's products take the
// full mask (ScoreVariant::p_and_ds's sinks; sm90: p_and_ds_t's sink keys).
template <int kBlockM, int kBlockN>
struct QueryBlockRange {
  int m_min = 0, m_max = 0;

  FLASHLAB_HD QueryBlockRange(const ScoreArgs& p, const WorkTile& t, int n_block, bool sinks = false) {
    const RowMask m = sequence_mask(p, t);
    const int64_t n0 = int64_t(n_block) * kBlockN;
    const int64_t n1 = (n0 + kBlockN < t.k_len ? n0 + kBlockN : int64_t(t.k_len)) - 1;
    if (t.q_len <= 0 || n1 < n0) return;
    int64_t i_min = 0, i_max = int64_t(t.q_len) - 1;
    if (m.right >= 0 && n0 - m.shift - m.right > i_min) i_min = n0 - m.shift - m.right;
    const bool left = m.left >= 0 && !(sinks && sink_block(p, n_block));  // a sink block: no second bound
    if (left && n1 + m.left - m.shift < i_max) i_max = n1 + m.left - m.shift;
    if (i_min > i_max) return;  // no row sees a key of this block: dK = dV = 0
    m_min = static_cast<int>(i_min / kBlockM);
    m_max = static_cast<int>(i_max / kBlockM) + 1;
  }
  FLASHLAB_HD bool empty() const { return m_max <= m_min; }
  // Whether key block n_block may hold a sink key.
  FLASHLAB_HD static bool sink_block(const ScoreArgs& p, int n_block) {
    return p.sink_tokens > int64_t(n_block) * kBlockN;
  }
};

// cuda_sm90's deterministic backward (sm90/flash_bwd_kernel.h, add_in_turn): key block n's turn
// on query block t.m_block's dq_accum tile. The tile's adders are the key blocks whose
// QueryBlockRange holds it, and a block's turn is the number of adders above it (so the highest
// adds first, and a CTA waits only for CTAs of higher key blocks, launched before it). Without
// sink blocks (sinks false, or n holds no sink key) the adders are the window's
// [n_min, n_max) = KeyBlockRange's, so the turn is n_max - 1 - n, with n_max = ceil((hi + 1) / N)
// from the last row's right bound hi. With sinks (the general kernels) the sink blocks [0, a)
// visit past their window too (QueryBlockRange's sinks: every row their right bound reaches):
// block n < a visits iff n·N < min(sink_tokens, hi + 1), so a = min(ceil(sink_tokens / N), n_max)
// — also where no row sees a window key (then the sink blocks are the only adders). A sink block
// below the window has the window's blocks and the sink blocks between above it.
// 32-bit arithmetic (the dQ writer has 24 registers): seqlens < 2^30 (supports()), so a row's
// diagonal d = row + shift lies in (-2^30, 2^30), and the window bounds are clamped to 2^30 - 1,
// past which they cut nothing.
template <int kBlockM, int kBlockN>
FLASHLAB_HD int dq_add_turn(const ScoreArgs& p, const WorkTile& t, int n_block, bool sinks) {
  constexpr int64_t kMaxBound = (int64_t(1) << 30) - 1;
  const int first = t.m_block * kBlockM;
  const int last = (first + kBlockM < t.q_len ? first + kBlockM : t.q_len) - 1;
  const int shift = p.bottom_right ? t.k_len - t.q_len : 0;
  int hi = t.k_len - 1;  // the last row's right bound
  if (p.window_right >= 0) {
    const int h = last + shift + static_cast<int>(p.window_right < kMaxBound ? p.window_right : kMaxBound);
    if (h < hi) hi = h;
  }
  const int n_max = hi < 0 ? 0 : hi / kBlockN + 1;
  if (!sinks || p.sink_tokens <= n_block * kBlockN) return n_max - 1 - n_block;
  int lo = 0;  // the first row's left bound
  if (p.window_left >= 0) {
    const int l = first + shift - static_cast<int>(p.window_left < kMaxBound ? p.window_left : kMaxBound);
    if (l > lo) lo = l;
  }
  const int sink_blocks = (p.sink_tokens + kBlockN - 1) / kBlockN;
  const int a = sink_blocks < n_max ? sink_blocks : n_max;
  if (hi < lo) return a - 1 - n_block;  // no row sees a window key
  const int n_min = lo / kBlockN;
  if (n_block >= n_min) return n_max - 1 - n_block;
  return n_max - n_min + (a < n_min ? a : n_min) - 1 - n_block;
}

}  // namespace common
}  // namespace flashlab
