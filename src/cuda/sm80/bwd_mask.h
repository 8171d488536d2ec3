// src/cuda/sm80/bwd_mask.h — which CTA owns which keys, and which query blocks see them.
//
//   BwdTileScheduler  blockIdx -> (key block, query head, sequence) for the main kernel; varlen
//                     offsets from cu_seqlens by FwdTile::set_sequence, as the forward's.
//   QueryBlockRange   the transpose of the forward's KeyBlockRange (mask.h): the query blocks that
//                     hold a row seeing at least one key of the block. Per (query block, key block)
//                     pair, KeyBlockRange::needs_mask() still says whether the per-element mask
//                     is needed (the criterion is symmetric: every row of the query block sees
//                     every key of the key block).
// Host and device (FLASHLAB_HD): tests/gpu/test_sm80_bwd_mask.cu checks QueryBlockRange against
// flashlab::key_visible() on the host.
#pragma once

#include <cstdint>

#include "cuda/sm80/fwd_params.h"
#include "cuda/sm80/mask.h"
#include "cuda/sm80/tile_scheduler.h"
#include "flashlab/config.h"
#include "flashlab/mask.h"

namespace flashlab {
namespace sm80 {

// Query blocks [m_min, m_max) hold every row that sees a key of key block n_block. Row i sees
// [lo(i), hi(i)]; lo and hi never decrease with i, and for a window/causal mask both are clamped
// forms of i + shift ∓ w, so:
//   rows with hi(i) >= n0 (first key)  are i >= n0 - shift - right   (all rows when right = -1)
//   rows with lo(i) <= n1 (last key)   are i <= n1 + left - shift    (all rows when left = -1)
// and a row in both sets sees a key of the block: its interval is nonempty (lo <= n1 <= k_len - 1
// and hi >= n0 >= 0 exclude the two ways the clamping can empty it) and overlaps [n0, n1].
template <int kBlockM, int kBlockN>
struct QueryBlockRange {
  int m_min = 0, m_max = 0;

  FLASHLAB_HD QueryBlockRange(const ScoreParams& p, const FwdTile& t, int n_block) {
    const RowMask m = sequence_mask(p, t);
    const int64_t n0 = int64_t(n_block) * kBlockN;
    const int64_t n1 = (n0 + kBlockN < t.k_len ? n0 + kBlockN : int64_t(t.k_len)) - 1;
    if (t.q_len <= 0 || n1 < n0) return;
    int64_t i_min = 0, i_max = int64_t(t.q_len) - 1;
    if (m.right >= 0 && n0 - m.shift - m.right > i_min) i_min = n0 - m.shift - m.right;
    if (m.left >= 0 && n1 + m.left - m.shift < i_max) i_max = n1 + m.left - m.shift;
    if (i_min > i_max) return;  // no row sees a key of this block: dK = dV = 0
    m_min = static_cast<int>(i_min / kBlockM);
    m_max = static_cast<int>(i_max / kBlockM) + 1;
  }
  FLASHLAB_HD bool empty() const { return m_max <= m_min; }
};

struct BwdTileScheduler {
  static dim3 grid(const SeqParams& p, int block_n) {
    return dim3(static_cast<unsigned>((p.seqlen_k + block_n - 1) / block_n), static_cast<unsigned>(p.heads_q),
                static_cast<unsigned>(p.batch));
  }
  // t.m_block is left 0: the main kernel sets it per query block it visits.
  __device__ static FwdTile tile(const SeqParams& p, int* n_block) {
    FwdTile t;
    *n_block = static_cast<int>(blockIdx.x);
    t.head = static_cast<int>(blockIdx.y);
    t.set_sequence(p, static_cast<int>(blockIdx.z));
    return t;
  }
};

}  // namespace sm80
}  // namespace flashlab
