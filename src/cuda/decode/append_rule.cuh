// src/cuda/decode/append_rule.cuh — the per-sequence rule of the fused / standalone append, on the
// device (the host's checks, kvcache.h check_device_data, applied per sequence): written once for
// the append kernel (which writes nothing of a sequence that fails it, and gives it NaN queries)
// and the decode kernels (which store NaN outputs and LSE for it: decode_kernel.cuh, append_failed).
#pragma once

#include <cstdint>

namespace flashlab {
namespace decode {

// P: AppendParams or DecodeParams (cache_seqlens, cache_leftpad, seqlen_new, capacity, rotary_dim,
// rotary_max_pos). Sets *len and *lp (sequence b's cache length and left padding); sequence_ok_for
// is the rule for a length and left padding already read.
template <typename P>
__device__ __forceinline__ bool sequence_ok_for(const P& p, int64_t len, int64_t lp) {
  if (len < 0 || lp < 0 || lp > len || len + p.seqlen_new > p.capacity) return false;
  return p.rotary_dim == 0 || len + p.seqlen_new - lp <= p.rotary_max_pos;
}
template <typename P>
__device__ __forceinline__ bool sequence_ok(const P& p, int b, int64_t* len, int64_t* lp) {
  *len = p.cache_seqlens[b];
  *lp = p.cache_leftpad != nullptr ? p.cache_leftpad[b] : 0;
  return sequence_ok_for(p, *len, *lp);
}

}  // namespace decode
}  // namespace flashlab
