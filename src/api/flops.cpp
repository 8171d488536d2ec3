// One mask-aware FLOP count shared by every benchmark.
#include "flashlab/flashlab.h"
#include "flashlab/mask.h"

namespace flashlab {

AttentionFlops attention_flops(const AttentionConfig& c, const int32_t* cu_q, const int32_t* cu_k) {
  AttentionFlops f;
  int64_t pairs = 0;
  if (cu_q && cu_k) {
    for (int64_t b = 0; b < c.batch; ++b)
      pairs += visible_pairs(make_row_mask(c, cu_q[b + 1] - cu_q[b], cu_k[b + 1] - cu_k[b]));
  } else {
    pairs = c.batch * visible_pairs(make_row_mask(c, c.seqlen_q, c.seqlen_k));
  }
  f.visible_pairs = pairs * c.heads_q;
  f.forward = 4.0 * static_cast<double>(c.head_dim) * static_cast<double>(f.visible_pairs);
  f.backward = 2.5 * f.forward;
  return f;
}

}  // namespace flashlab
