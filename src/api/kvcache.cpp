// src/api/kvcache.cpp — the KV-cache entry points (flashlab/kvcache.h, docs/kvcache.md):
// validation, then on the CPU impl cpu_flash (src/cpu/kvcache_cpu_flash.cpp; what auto picks) or the
// float64 reference (src/cpu/kvcache_reference.cpp); kvcache_append is the same append for both
// (kv::append). On device kCUDA (impl auto, cuda_sm80 or its alias cuda_sm90) src/cuda/decode/ runs
// the append, the attention (with a fused append and rotary) and the combine.
//
// Every rule is checked before anything is written (cache included). The int32 side arrays
// (cache_seqlens, leftpad, cache_batch_idx, block_table) are checked entry by entry by
// check_side_arrays: on the CPU always (host memory); on CUDA only with check_device_data (they
// are copied to the host first, which synchronizes the stream), because a decode step must not
// synchronize. Only the block_table entries a sequence uses (its first
// ceil((cache_seqlens + seqlen_new) / page_size) pages) must be valid, the rest may be padding.
#include <cmath>
#include <sstream>
#include <utility>

#include "api/backend.h"

#include "api/device.h"
#include "api/validate.h"
#include "cpu/kvcache_reference.h"

namespace flashlab {
namespace detail {
namespace {

template <typename... Args>
Status invalid(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return Status::Invalid(os.str());
}

Status check_ref(const char* name, const void* ptr, int64_t bs, int64_t rs, int64_t hs, int64_t ds) {
  if (ptr == nullptr) return invalid(name, " must not be null");
  if (ds != 1) return invalid(name, " dim_stride (", ds, ") must be 1 (the last dimension is contiguous)");
  if (bs < 0 || rs < 0 || hs < 0)
    return invalid(name, " strides (", bs, ", ", rs, ", ", hs, ") must be >= 0");
  return Status::Ok();
}
template <typename R>
Status check_ref(const char* name, const R& t) {
  return check_ref(name, t.ptr, t.batch_stride, t.row_stride, t.head_stride, t.dim_stride);
}

Status check_side_arrays(const KvCacheParams& p, bool attend, const int32_t* seqlens, const int32_t* leftpads,
                         const int32_t* batch_idx, const int32_t* table);

// Everything that does not depend on the selected implementation. `attend`: q/out/lse are used.
Status validate_kvcache(const KvCacheParams& p, bool attend) {
  if (p.dropout_p != 0.0f) return invalid("dropout_p (", p.dropout_p, ") must be 0 on the KV-cache path");
  if (p.cu_seqlens_q || p.cu_seqlens_k)
    return invalid("cu_seqlens_q / cu_seqlens_k must be null on the KV-cache path (cache_seqlens gives the lengths)");
  if (p.causal_align != CausalAlign::kBottomRight)
    return invalid("causal_align must be kBottomRight on the KV-cache path (the diagonal ends at the last key)");
  const bool paged = p.block_table != nullptr;
  if (paged) {
    if (p.page_size < 1) return invalid("page_size (", p.page_size, ") must be >= 1 with a block_table");
    if (p.max_pages < 1) return invalid("max_pages (", p.max_pages, ") must be >= 1 with a block_table");
    if (p.num_pages < 1) return invalid("num_pages (", p.num_pages, ") must be >= 1 with a block_table");
    if (p.block_table_batch_stride != 0 && p.block_table_batch_stride < p.max_pages)
      return invalid("block_table_batch_stride (", p.block_table_batch_stride, ") must be 0 or >= max_pages (",
                     p.max_pages, ")");
    if (p.cache_batch_idx) return invalid("cache_batch_idx must be null with a paged cache (block_table)");
    if (p.page_layout != KvLayout::kNHD && p.page_layout != KvLayout::kHND)
      return invalid("page_layout (", static_cast<int>(p.page_layout), ") is not a KvLayout");
  } else {
    if (p.max_seqlen_cache < 1) return invalid("max_seqlen_cache (", p.max_seqlen_cache, ") must be >= 1");
    if (p.batch_cache < 0) return invalid("batch_cache (", p.batch_cache, ") must be >= 0 (0 = batch)");
    if (!p.cache_batch_idx && p.batch_cache != 0 && p.batch_cache < p.batch)
      return invalid("batch_cache (", p.batch_cache, ") must be >= batch (", p.batch, ") without cache_batch_idx");
  }
  // The generic rules, with seqlen_k = the cache capacity.
  AttentionConfig c = p;
  c.seqlen_k = kv::capacity(p);
  if (!attend && c.seqlen_q < 1) c.seqlen_q = 1;
  FLASHLAB_RETURN_IF_ERROR(validate_config(c));
  if (p.cache_dtype != p.dtype)
    return invalid("cache_dtype (", to_string(p.cache_dtype), ") must equal dtype (", to_string(p.dtype),
                   "): caches of another type than the queries are not supported yet");
  if (attend) {
    FLASHLAB_RETURN_IF_ERROR(check_ref("q", p.q));
    FLASHLAB_RETURN_IF_ERROR(check_ref("out", p.out));
    if (p.lse && (p.lse_batch_stride < 0 || p.lse_head_stride < 0))
      return invalid("lse strides (", p.lse_batch_stride, ", ", p.lse_head_stride, ") must be >= 0");
  }
  FLASHLAB_RETURN_IF_ERROR(check_ref("k_cache", p.k_cache));
  FLASHLAB_RETURN_IF_ERROR(check_ref("v_cache", p.v_cache));
  if (paged && p.page_size > 1 && p.heads_kv > 1) {
    const bool nhd = p.k_cache.row_stride > p.k_cache.head_stride;
    if (nhd != (p.page_layout == KvLayout::kNHD) || (p.v_cache.row_stride > p.v_cache.head_stride) != nhd)
      return invalid("k_cache/v_cache strides do not match page_layout ",
                     p.page_layout == KvLayout::kNHD ? "NHD (row_stride > head_stride)" : "HND (head_stride > row_stride)");
  }
  if (p.cache_seqlens == nullptr) return invalid("cache_seqlens must not be null");
  if ((p.k_new.ptr == nullptr) != (p.v_new.ptr == nullptr))
    return invalid("k_new and v_new must both be set (append) or both be null");
  if (p.k_new.ptr) {
    if (p.seqlen_new < 1) return invalid("seqlen_new (", p.seqlen_new, ") must be >= 1 with k_new/v_new");
    FLASHLAB_RETURN_IF_ERROR(check_ref("k_new", p.k_new));
    FLASHLAB_RETURN_IF_ERROR(check_ref("v_new", p.v_new));
    if (p.seqlen_new > kv::capacity(p))  // too short whatever cache_seqlens holds: checkable on any device
      return invalid("cache too short for the append: seqlen_new (", p.seqlen_new, ") > capacity (",
                     kv::capacity(p), ")");
  } else if (p.seqlen_new != 0) {
    return invalid("seqlen_new (", p.seqlen_new, ") must be 0 without k_new/v_new");
  }
  if ((p.rotary_cos == nullptr) != (p.rotary_sin == nullptr))
    return invalid("rotary_cos and rotary_sin must both be set or both be null");
  if (p.rotary_cos == nullptr && p.rotary_dim != 0)
    return invalid("rotary_dim (", p.rotary_dim, ") must be 0 without rotary_cos/rotary_sin");
  if (p.rotary_cos) {
    if (p.rotary_dim < 2 || p.rotary_dim % 2 != 0 || p.rotary_dim > p.head_dim)
      return invalid("rotary_dim (", p.rotary_dim, ") must be even and in [2, head_dim (", p.head_dim, ")]");
    if (p.rotary_max_pos < 1) return invalid("rotary_max_pos (", p.rotary_max_pos, ") must be >= 1");
    if (p.rotary_dtype != DType::kFloat32 && p.rotary_dtype != DType::kBFloat16 && p.rotary_dtype != DType::kFloat16)
      return invalid("rotary_dtype (", to_string(p.rotary_dtype), ") must be fp32, bf16 or fp16");
    if (p.rotary_style != RotaryStyle::kInterleaved && p.rotary_style != RotaryStyle::kNeoX)
      return invalid("rotary_style (", static_cast<int>(p.rotary_style), ") is not a RotaryStyle");
  }
  if (p.num_splits < 0) return invalid("num_splits (", p.num_splits, ") must be >= 0 (0 = auto, 1 = none)");
  if (p.split_size < 0) return invalid("split_size (", p.split_size, ") must be >= 0 (0 = use num_splits)");
  if (p.split_size > 0 && p.num_splits > 1)
    return invalid("set num_splits (", p.num_splits, ") or split_size (", p.split_size, "), not both");

  // Placement (CUDA builds ask the runtime; a CPU-only build cannot tell).
  const std::pair<const void*, const char*> placed[] = {
      {attend ? p.q.ptr : nullptr, "q"},     {attend ? p.out.ptr : nullptr, "out"},
      {attend ? p.lse : nullptr, "lse"},     {p.k_cache.ptr, "k_cache"},
      {p.v_cache.ptr, "v_cache"},            {p.k_new.ptr, "k_new"},
      {p.v_new.ptr, "v_new"},                {p.cache_seqlens, "cache_seqlens"},
      {p.cache_leftpad, "cache_leftpad"},    {p.cache_batch_idx, "cache_batch_idx"},
      {p.block_table, "block_table"},        {p.rotary_cos, "rotary_cos"},
      {p.rotary_sin, "rotary_sin"}};
  for (const auto& t : placed)
    if (t.first) FLASHLAB_RETURN_IF_ERROR(check_pointer_device(t.first, p.device, t.second));

  if (p.device != Device::kCPU) {
#if defined(FLASHLAB_WITH_CUDA_DECODE)
    if (p.device == Device::kCUDA) {
      FLASHLAB_RETURN_IF_ERROR(cuda_kvcache_supports(p, attend));
      if (!p.check_device_data) return Status::Ok();  // device data: guarded by the kernels (docs)
      SideArrays h;
      FLASHLAB_RETURN_IF_ERROR(cuda_fetch_side_arrays(p, &h));
      return check_side_arrays(p, attend, h.seqlens.data(), h.leftpad.empty() ? nullptr : h.leftpad.data(),
                               h.batch_idx.empty() ? nullptr : h.batch_idx.data(),
                               h.table.empty() ? nullptr : h.table.data());
    }
#endif
    return Status::Unsupported(std::string("impl ") + to_string(p.impl == Impl::kAuto ? Impl::kAuto : p.impl) +
                               " does not support the KV-cache path yet (device " + to_string(p.device) +
                               "): on the cpu impl cpu_flash and reference implement it");
  }
  if (p.impl != Impl::kAuto && p.impl != Impl::kReference && p.impl != Impl::kCpuFlash)
    return Status::Unsupported(std::string("impl ") + to_string(p.impl) + " does not run the KV-cache path on the cpu: " +
                               "use impl cpu_flash or reference (or auto)");
  if (p.impl == Impl::kCpuFlash && p.head_dim > kCpuMaxHeadDim)
    return Status::Unsupported("head_dim (" + std::to_string(p.head_dim) + ") is not supported by impl cpu_flash: " +
                               "supported 1.." + std::to_string(kCpuMaxHeadDim) + " (impl reference has no limit)");
  return check_side_arrays(p, attend, p.cache_seqlens, p.cache_leftpad, p.cache_batch_idx, p.block_table);
}

// The rules on the int32 side arrays, given as host copies (on the CPU: the caller's arrays).
Status check_side_arrays(const KvCacheParams& p, bool attend, const int32_t* seqlens, const int32_t* leftpads,
                         const int32_t* batch_idx, const int32_t* table) {
  const bool paged = p.block_table != nullptr;
  const int64_t cap = kv::capacity(p);
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t len = seqlens[b];
    if (len < 0 || len > cap) return invalid("cache_seqlens[", b, "] (", len, ") must be in [0, capacity (", cap, ")]");
    if (len + p.seqlen_new > cap)
      return invalid("cache too short for the append: cache_seqlens[", b, "] (", len, ") + seqlen_new (",
                     p.seqlen_new, ") > capacity (", cap, ")");
    const int64_t lp = leftpads ? leftpads[b] : 0;
    if (lp < 0 || lp > len)
      return invalid("cache_leftpad[", b, "] (", lp, ") must be in [0, cache_seqlens[", b, "] (", len, ")]");
    const int64_t L = len + p.seqlen_new - lp;
    if (attend && (p.causal || p.window_left >= 0 || p.window_right >= 0 || p.rotary_cos) && p.seqlen_q > L)
      return invalid("seqlen_q (", p.seqlen_q, ") > attended length (", L, ") of sequence ", b,
                     " with causal, a window or rotary: the queries must be the last keys' positions");
    if (p.rotary_cos && L > p.rotary_max_pos)
      return invalid("rotary_max_pos (", p.rotary_max_pos, ") too small: sequence ", b, " needs positions up to ", L - 1);
    if (paged) {
      const int64_t bts = p.block_table_batch_stride ? p.block_table_batch_stride : p.max_pages;
      const int64_t used = (len + p.seqlen_new + p.page_size - 1) / p.page_size;
      for (int64_t k = 0; k < used; ++k) {
        const int64_t e = table[b * bts + k];
        if (e < 0 || e >= p.num_pages)
          return invalid("block_table[", b, "][", k, "] (", e, ") out of range [0, num_pages (", p.num_pages, "))");
      }
    } else if (batch_idx) {
      const int64_t rows = p.batch_cache ? p.batch_cache : p.batch;
      const int64_t r = batch_idx[b];
      if (r < 0 || r >= rows)
        return invalid("cache_batch_idx[", b, "] (", r, ") out of range [0, batch_cache (", rows, "))");
    }
  }
  return Status::Ok();
}

template <typename Fn>
Status guarded(Fn fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kOutOfMemory, "out of host memory for scratch buffers");
  } catch (const std::exception& e) {
    return Status(StatusCode::kInternal, std::string("unexpected exception: ") + e.what());
  }
}

}  // namespace
}  // namespace detail

Status attention_with_kvcache(const KvCacheParams& params) {
  FLASHLAB_RETURN_IF_ERROR(detail::validate_kvcache(params, true));
  KvCacheParams p = params;
  if (std::isnan(p.softmax_scale)) p.softmax_scale = 1.0f / std::sqrt(static_cast<float>(p.head_dim));
#if defined(FLASHLAB_WITH_CUDA_DECODE)
  if (p.device == Device::kCUDA) return detail::guarded([&] { return detail::cuda_attention_with_kvcache(p); });
#endif
  // auto picks cpu_flash, as the training path's kBackends order does, except past its head_dim limit.
  if (p.impl == Impl::kAuto) p.impl = p.head_dim <= detail::kCpuMaxHeadDim ? Impl::kCpuFlash : Impl::kReference;
  if (p.impl == Impl::kCpuFlash) return detail::guarded([&] { return detail::kv::cpu_flash_kvcache(p); });
  return detail::guarded([&] { return detail::kv::reference_kvcache(p, true); });
}

Status kvcache_append(const KvCacheParams& params) {
  FLASHLAB_RETURN_IF_ERROR(detail::validate_kvcache(params, false));
#if defined(FLASHLAB_WITH_CUDA_DECODE)
  if (params.device == Device::kCUDA) return detail::guarded([&] { return detail::cuda_kvcache_append(params); });
#endif
  return detail::guarded([&] { return detail::kv::reference_kvcache(params, false); });
}

Status kvcache_workspace_size(const KvCacheParams& params, int64_t* bytes) {
  if (bytes == nullptr) return Status::Invalid("bytes must not be null");
  FLASHLAB_RETURN_IF_ERROR(detail::validate_kvcache(params, true));
  *bytes = 0;
#if defined(FLASHLAB_WITH_CUDA_DECODE)
  if (params.device == Device::kCUDA) return detail::cuda_kvcache_workspace_size(params, bytes);
#endif
  return Status::Ok();
}

Status attention_combine(const CombineParams& p) {
  using detail::invalid;
  if (p.num_splits < 1) return invalid("num_splits (", p.num_splits, ") must be >= 1");
  if (p.batch < 1) return invalid("batch (", p.batch, ") must be >= 1");
  if (p.seqlen_q < 1) return invalid("seqlen_q (", p.seqlen_q, ") must be >= 1");
  if (p.heads < 1) return invalid("heads (", p.heads, ") must be >= 1");
  if (p.head_dim < 1) return invalid("head_dim (", p.head_dim, ") must be >= 1");
  if (p.dtype != DType::kFloat32 && p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16)
    return invalid("dtype (", static_cast<int>(p.dtype), ") must be fp32, fp16 or bf16");
  if (p.num_threads < 0) return invalid("num_threads (", p.num_threads, ") must be >= 0 (0 = all)");
  if (p.out_partial == nullptr) return invalid("out_partial must not be null");
  if (p.lse_partial == nullptr) return invalid("lse_partial must not be null");
  if (p.out_partial_split_stride < 0 || p.out_partial_batch_stride < 0 || p.out_partial_row_stride < 0 ||
      p.out_partial_head_stride < 0 || p.lse_partial_split_stride < 0 || p.lse_partial_batch_stride < 0 ||
      p.lse_partial_head_stride < 0 || p.lse_batch_stride < 0 || p.lse_head_stride < 0)
    return invalid("combine strides must be >= 0");
  FLASHLAB_RETURN_IF_ERROR(detail::check_ref("out", p.out));
  if (p.device == Device::kCUDA) {
#if defined(FLASHLAB_WITH_CUDA_DECODE)
    const std::pair<const void*, const char*> placed[] = {
        {p.out_partial, "out_partial"}, {p.lse_partial, "lse_partial"}, {p.out.ptr, "out"}, {p.lse, "lse"}};
    for (const auto& t : placed)
      if (t.first) FLASHLAB_RETURN_IF_ERROR(detail::check_pointer_device(t.first, p.device, t.second));
    return detail::guarded([&] { return detail::cuda_attention_combine(p); });
#else
    return Status::Unsupported("attention_combine on device cuda needs a build with CUDA (FLASHLAB_CUDA=ON)");
#endif
  }
  if (p.device != Device::kCPU) return invalid("device (", static_cast<int>(p.device), ") is not a Device");
  return detail::guarded([&] { return detail::kv::reference_combine(p); });
}

}  // namespace flashlab
