// src/cpu/kvcache_cpu_flash.cpp — the KV-cache path (docs/kvcache.md) for impl cpu_flash.
//
// No second flash loop: the cache is turned into a variable-length training problem and handed
// to cpu_flash_forward (src/cpu/cpu_flash.cpp), whose varlen masks are already bottom-right per
// sequence (make_row_mask(q_len, k_len)), which is exactly the cache path's diagonal.
//
// 1. append: kv::append, shared with the float64 reference (it is semantics, not float64 math:
//    the new keys are rotated in double and rounded to dtype once, so both implementations store
//    bit-identical caches).
// 2. gather, per (sequence b, kv head): the L_b attended keys/values (slots leftpad .. leftpad +
//    L_b - 1, through slot_offset) are copied byte for byte into packed (sum L_b, heads_kv,
//    head_dim) buffers in dtype; per (b, query head) the queries, rotated at positions
//    L_b - seqlen_q + i with kv::apply_rotary and rounded to dtype as the reference does, into
//    packed (batch * seqlen_q, heads_q, head_dim). Only key slots are read: NaN elsewhere cannot
//    leak.
// 3. cpu_flash_forward over cu_seqlens_q = b * seqlen_q, cu_seqlens_k = prefix sums of L_b, into
//    packed out/LSE scratch, then copied to the caller's strided out and lse.
//
// Splits (num_splits, split_size) are not used: one online softmax over all keys is the same math
// as the split-and-merge, and differs from it by rounding only. A sequence's result does not
// depend on the batch it is in (every work item reads only its own sequence).
// Extra memory: a copy of the attended K/V (what a decode step reads anyway) and of q/out.
#include <omp.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "api/backend.h"
#include "cpu/kvcache_reference.h"
#include "cpu/reference_io.h"

namespace flashlab {
namespace detail {
namespace kv {
namespace {
constexpr int64_t kMaxRows = std::numeric_limits<int32_t>::max();  // varlen cu_seqlens are int32
}  // namespace

Status cpu_flash_kvcache(const KvCacheParams& p) {
  const int64_t B = p.batch, sq = p.seqlen_q, hq = p.heads_q, hk = p.heads_kv, d = p.head_dim;
  const int64_t es = dtype_size(p.dtype), row_bytes = d * es;

  // Checked before the append writes anything.
  const auto too_many = [](const char* what, int64_t n) {
    return Status::Unsupported(std::string("impl cpu_flash on the KV-cache path indexes rows with int32: ") +
                               what + " (" + std::to_string(n) + ") exceeds 2^31 - 1; use impl reference");
  };
  if (B * sq > kMaxRows) return too_many("batch * seqlen_q", B * sq);
  std::vector<int32_t> cu_q(B + 1), cu_k(B + 1);
  int64_t max_l = 0;
  cu_q[0] = cu_k[0] = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t L = attended_length(p, b), end = cu_k[b] + L;
    if (end > kMaxRows) return too_many("the attended keys of the batch", end);
    max_l = std::max(max_l, L);
    cu_q[b + 1] = static_cast<int32_t>((b + 1) * sq);
    cu_k[b + 1] = static_cast<int32_t>(end);
  }
  const int64_t total_k = cu_k[B], total_q = B * sq;

  std::vector<char> q(total_q * hq * row_bytes), k(total_k * hk * row_bytes), v(k.size());
  std::vector<char> out(total_q * hq * row_bytes);
  std::vector<float> lse(p.lse ? hq * total_q : 0);
  append(p);  // after every allocation: an out-of-memory error leaves the cache untouched

  // Gather. Items: (b, kv head) for K/V and (b, query head) for Q; both parallel over b * heads.
  const int64_t items = B * hq;
  const int threads = ref::thread_count(p.num_threads, items);
  const char* kc = static_cast<const char*>(p.k_cache.ptr);
  const char* vc = static_cast<const char*>(p.v_cache.ptr);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t b = item / hq, h = item % hq, lp = leftpad(p, b), L = cu_k[b + 1] - cu_k[b];
    if (h < hk)  // kv head h of sequence b
      for (int64_t j = 0; j < L; ++j) {
        const int64_t dst = ((cu_k[b] + j) * hk + h) * row_bytes;
        std::memcpy(&k[dst], kc + slot_offset(p, p.k_cache, b, lp + j, h) * es, row_bytes);
        std::memcpy(&v[dst], vc + slot_offset(p, p.v_cache, b, lp + j, h) * es, row_bytes);
      }
    std::vector<double> x(p.rotary_dim > 0 ? d : 0);
    for (int64_t i = 0; i < sq; ++i) {
      const char* src = static_cast<const char*>(p.q.ptr) +
                        (b * p.q.batch_stride + i * p.q.row_stride + h * p.q.head_stride) * es;
      char* dst = &q[((b * sq + i) * hq + h) * row_bytes];
      if (p.rotary_dim == 0) {
        std::memcpy(dst, src, row_bytes);
        continue;
      }
      for (int64_t e = 0; e < d; ++e) x[e] = load_as_float(p.dtype, src + e * es);
      apply_rotary(p, L - sq + i, x.data());
      for (int64_t e = 0; e < d; ++e) ref::store_rounded(p.dtype, dst + e * es, x[e]);
    }
  }

  FwdParams f;
  // scale, softcap, ALiBi, causal, window, sink tokens (key 0 of a sequence is its first gathered
  // key, slot leftpad: exactly the KV path's sinks), threads
  static_cast<AttentionConfig&>(f) = p;
  f.impl = Impl::kCpuFlash;
  f.causal_align = CausalAlign::kBottomRight;
  f.seqlen_q = sq;
  f.seqlen_k = max_l;
  f.cu_seqlens_q = cu_q.data();
  f.cu_seqlens_k = cu_k.data();
  f.q = TensorRef{q.data(), 0, hq * d, d, 1};
  f.k = TensorRef{k.data(), 0, hk * d, d, 1};
  f.v = TensorRef{v.data(), 0, hk * d, d, 1};
  f.out = MutTensorRef{out.data(), 0, hq * d, d, 1};
  f.lse = p.lse ? lse.data() : nullptr;
  f.lse_head_stride = total_q;  // varlen LSE: (heads_q, total_q)
  FLASHLAB_RETURN_IF_ERROR(cpu_flash_forward(f));

  // Scatter to the caller's strided out and lse.
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t h = 0; h < hq; ++h) {
        char* dst = static_cast<char*>(p.out.ptr) +
                    (b * p.out.batch_stride + i * p.out.row_stride + h * p.out.head_stride) * es;
        std::memcpy(dst, &out[((b * sq + i) * hq + h) * row_bytes], row_bytes);
        if (p.lse) p.lse[b * p.lse_batch_stride + h * p.lse_head_stride + i] = lse[h * total_q + b * sq + i];
      }
  return Status::Ok();
}

}  // namespace kv
}  // namespace detail
}  // namespace flashlab
