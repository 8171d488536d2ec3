// python/src/kvcache.cpp — flashlab._core's inference entry points (issue 14, docs/kvcache.md):
//
//   _core.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens, out, lse=None, *, k=None, v=None,
//       rotary_cos=None, rotary_sin=None, rotary_interleaved=False, cache_batch_idx=None,
//       cache_leftpad=None, block_table=None, page_layout="NHD", softmax_scale=None, causal=False,
//       window_left=-1, window_right=-1, sink_tokens=0, softcap=0.0, alibi_slopes=None, sink_logits=None,
//       num_splits=0, split_size=0, check_device_data=False, impl="auto", num_threads=0, stream=0,
//       workspace=None)
//   _core.kvcache_workspace_size(<attention_with_kvcache's arguments but workspace>) -> int (bytes)
//   _core.kvcache_append(k_cache, v_cache, cache_seqlens, k, v, *, <the cache and rotary options>)
//   _core.attention_combine(out_partial, lse_partial, out, lse=None, *, num_threads=0, stream=0,
//       workspace=None)
//
// The same conventions as core.cpp: DLPack tensors used in place (never copied), element strides
// passed through, errors as flashlab.FlashlabError / UnsupportedError with the C++ Status message.
// The caches are written in place when k/v are given, so they must then be writable tensors.
//
// Cache shapes (read off the tensors):
//   contiguous (no block_table): (batch_cache, max_seqlen_cache, heads_kv, head_dim)
//   paged NHD:                   (num_pages, page_size, heads_kv, head_dim)   (flash-attn's layout)
//   paged HND:                   (num_pages, heads_kv, page_size, head_dim)
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

#include "tensor_args.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace flashlab_py {
namespace {

using flashlab::DType;
using flashlab::KvCacheParams;
using flashlab::KvLayout;

template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// A cache tensor: writable when the call appends to it (then it is written in place).
struct CacheArray {
  std::optional<OutArray> rw;
  std::optional<InArray> ro;
  InArray view() const { return rw ? InArray(*rw) : *ro; }
  void* data() const { return rw ? rw->data() : const_cast<void*>(ro->data()); }
};

CacheArray cache_array(const char* name, const nb::handle& obj, bool writable) {
  CacheArray c;
  if (writable) {
    OutArray a;
    if (!nb::try_cast(nb::borrow(obj), a, false))
      fail(cat(name, " must be a writable tensor (NumPy array, torch tensor, DLPack): k/v are appended into it "
                     "in place"));
    c.rw = a;
  } else {
    InArray a;
    if (!nb::try_cast(nb::borrow(obj), a, false)) fail(cat(name, " must be a tensor (NumPy array, torch tensor, DLPack)"));
    c.ro = a;
  }
  return c;
}

void check_ndim4(const char* name, const InArray& a, const char* shape) {
  if (a.ndim() != 4) fail(cat(name, " has ", a.ndim(), " dimensions (shape ", shape_str(a), "); expected 4: ", shape));
}

// int32 (n,) on the device of the cache, contiguous.
const int32_t* int32_vec(const char* name, const InArray& a, int64_t n, const Layout& L) {
  if (!is(a.dtype(), nb::dlpack::dtype_code::Int, 32)) fail(cat(name, ".dtype (", dtype_str(a.dtype()), ") must be int32"));
  if (a.ndim() != 1 || int64_t(a.shape(0)) != n) fail(cat(name, ".shape ", shape_str(a), " must be (batch,) = (", n, ",)"));
  if (n > 1 && a.stride(0) != 1) fail(cat(name, " must be contiguous (stride ", a.stride(0), ")"));
  check_placement(name, a.device_type(), a.device_id(), L);
  return static_cast<const int32_t*>(a.data());
}

// The strides of a (batch, seqlen, heads, head_dim) tensor whose shape was checked by the caller.
template <typename Ref>
Ref ref4(void* ptr, const InArray& a, int row_dim, int head_dim) {
  Ref r;
  r.ptr = ptr;
  r.batch_stride = a.stride(0);
  r.row_stride = a.stride(row_dim);
  r.head_stride = a.stride(head_dim);
  r.dim_stride = a.shape(3) == 1 ? 1 : a.stride(3);  // a size-1 dimension's stride means nothing
  return r;
}

struct CacheOptions {
  std::optional<InArray> k, v, rotary_cos, rotary_sin, cache_batch_idx, cache_leftpad, block_table;
  bool rotary_interleaved = false;
  std::string page_layout = "NHD";
};

// Fills everything about the cache, the append and rotary into `p`; p->batch must be set.
// heads_kv / head_dim come from the cache; `L` is where the cache lives (q's device when attending).
void set_cache(const CacheArray& kc, const CacheArray& vc, const InArray& cache_seqlens, const CacheOptions& o,
               const Layout& L, KvCacheParams* p) {
  const bool paged = o.block_table.has_value();
  KvLayout layout = KvLayout::kNHD;
  if (o.page_layout == "HND") {
    layout = KvLayout::kHND;
  } else if (o.page_layout != "NHD") {
    fail(cat("page_layout ('", o.page_layout, "') must be 'NHD' or 'HND'"));
  }
  if (!paged && layout != KvLayout::kNHD)
    fail("page_layout 'HND' needs a paged cache (block_table); a contiguous cache is (batch_cache, seqlen, heads_kv, head_dim)");
  const InArray k = kc.view(), v = vc.view();
  const char* shape = !paged ? "(batch_cache, max_seqlen_cache, heads_kv, head_dim)"
                      : layout == KvLayout::kNHD ? "(num_pages, page_size, heads_kv, head_dim) for page_layout NHD"
                                                 : "(num_pages, heads_kv, page_size, head_dim) for page_layout HND";
  check_ndim4("k_cache", k, shape);
  check_ndim4("v_cache", v, shape);
  for (size_t d = 0; d < 4; ++d)
    if (v.shape(d) != k.shape(d)) fail(cat("v_cache.shape ", shape_str(v), " must equal k_cache.shape ", shape_str(k)));
  check_placement("k_cache", k.device_type(), k.device_id(), L);
  check_placement("v_cache", v.device_type(), v.device_id(), L);
  p->cache_dtype = dtype_of("k_cache", k);
  if (dtype_of("v_cache", v) != p->cache_dtype)
    fail(cat("v_cache.dtype (", dtype_str(v.dtype()), ") must equal k_cache.dtype (", dtype_str(k.dtype()), ")"));
  const int row_dim = paged && layout == KvLayout::kHND ? 2 : 1;
  const int head_dim = paged && layout == KvLayout::kHND ? 1 : 2;
  p->heads_kv = static_cast<int64_t>(k.shape(head_dim));
  p->k_cache = ref4<flashlab::MutTensorRef>(kc.data(), k, row_dim, head_dim);
  p->v_cache = ref4<flashlab::MutTensorRef>(vc.data(), v, row_dim, head_dim);
  if (paged) {
    const InArray& bt = *o.block_table;
    if (!is(bt.dtype(), nb::dlpack::dtype_code::Int, 32))
      fail(cat("block_table.dtype (", dtype_str(bt.dtype()), ") must be int32"));
    if (bt.ndim() != 2 || int64_t(bt.shape(0)) != p->batch || bt.shape(1) < 1)
      fail(cat("block_table.shape ", shape_str(bt), " must be (batch, max_pages) with batch = ", p->batch,
               " and max_pages >= 1"));
    if (bt.shape(1) > 1 && bt.stride(1) != 1) fail(cat("block_table.stride(1) (", bt.stride(1), ") must be 1"));
    check_placement("block_table", bt.device_type(), bt.device_id(), L);
    if (o.cache_batch_idx) fail("cache_batch_idx must be None with a paged cache (block_table)");
    p->block_table = static_cast<const int32_t*>(bt.data());
    p->max_pages = static_cast<int64_t>(bt.shape(1));
    p->block_table_batch_stride = bt.shape(0) > 1 ? bt.stride(0) : p->max_pages;
    p->num_pages = static_cast<int64_t>(k.shape(0));
    p->page_size = static_cast<int64_t>(k.shape(row_dim));
    p->page_layout = layout;
  } else {
    p->batch_cache = static_cast<int64_t>(k.shape(0));
    p->max_seqlen_cache = static_cast<int64_t>(k.shape(1));
    if (o.cache_batch_idx) p->cache_batch_idx = int32_vec("cache_batch_idx", *o.cache_batch_idx, p->batch, L);
  }
  p->cache_seqlens = int32_vec("cache_seqlens", cache_seqlens, p->batch, L);
  if (o.cache_leftpad) p->cache_leftpad = int32_vec("cache_leftpad", *o.cache_leftpad, p->batch, L);

  if (o.k.has_value() != o.v.has_value()) fail("k and v (the new keys and values) must be given together or not at all");
  if (o.k) {
    const InArray &kn = *o.k, &vn = *o.v;
    const char* nshape = "(batch, seqlen_new, heads_kv, head_dim)";
    check_ndim4("k", kn, nshape);
    check_ndim4("v", vn, nshape);
    const int64_t want[4] = {p->batch, int64_t(kn.shape(1)), p->heads_kv, int64_t(k.shape(3))};
    for (int d = 0; d < 4; ++d)
      if (int64_t(kn.shape(d)) != want[d] || vn.shape(d) != kn.shape(d))
        fail(cat("k.shape ", shape_str(kn), " and v.shape ", shape_str(vn), " must both be ", nshape, " = (", want[0],
                 ", seqlen_new, ", want[2], ", ", want[3], ")"));
    check_placement("k", kn.device_type(), kn.device_id(), L);
    check_placement("v", vn.device_type(), vn.device_id(), L);
    if (dtype_of("k", kn) != p->cache_dtype || dtype_of("v", vn) != p->cache_dtype)
      fail(cat("k and v (", dtype_str(kn.dtype()), ", ", dtype_str(vn.dtype()), ") must have k_cache's dtype (",
               dtype_str(k.dtype()), ")"));
    p->k_new = ref4<flashlab::TensorRef>(const_cast<void*>(kn.data()), kn, 1, 2);
    p->v_new = ref4<flashlab::TensorRef>(const_cast<void*>(vn.data()), vn, 1, 2);
    p->seqlen_new = static_cast<int64_t>(kn.shape(1));
  }

  if (o.rotary_cos.has_value() != o.rotary_sin.has_value())
    fail("rotary_cos and rotary_sin must be given together or not at all");
  if (o.rotary_cos) {
    const InArray &c = *o.rotary_cos, &s = *o.rotary_sin;
    for (const auto& [name, a] : {std::pair<const char*, const InArray*>{"rotary_cos", &c}, {"rotary_sin", &s}}) {
      dtype_of(name, *a);  // float32, float16 or bfloat16, else an error naming it
      if (a->ndim() != 2 || a->shape(0) < 1 || a->shape(1) < 1)
        fail(cat(name, ".shape ", shape_str(*a), " must be (rotary_max_pos, rotary_dim / 2)"));
      if ((a->shape(1) > 1 && a->stride(1) != 1) || (a->shape(0) > 1 && a->stride(0) != int64_t(a->shape(1))))
        fail(cat(name, " must be contiguous (strides (", a->stride(0), ", ", a->stride(1), "))"));
      check_placement(name, a->device_type(), a->device_id(), L);
    }
    if (s.shape(0) != c.shape(0) || s.shape(1) != c.shape(1))
      fail(cat("rotary_sin.shape ", shape_str(s), " must equal rotary_cos.shape ", shape_str(c)));
    p->rotary_dtype = dtype_of("rotary_cos", c);
    if (dtype_of("rotary_sin", s) != p->rotary_dtype)
      fail(cat("rotary_sin.dtype (", dtype_str(s.dtype()), ") must equal rotary_cos.dtype (", dtype_str(c.dtype()), ")"));
    p->rotary_cos = c.data();
    p->rotary_sin = s.data();
    p->rotary_max_pos = static_cast<int64_t>(c.shape(0));
    p->rotary_dim = 2 * static_cast<int64_t>(c.shape(1));
    p->rotary_style = o.rotary_interleaved ? flashlab::RotaryStyle::kInterleaved : flashlab::RotaryStyle::kNeoX;
  }
}

// attention_with_kvcache, or with size_only the workspace it would need (kvcache_workspace_size on the
// same parameters: shapes and options only, device data is not read on CUDA) without running it.
int64_t kvcache_call(const InArray& q, nb::handle k_cache, nb::handle v_cache, const InArray& cache_seqlens,
                            const OutArray& out, const std::optional<OutArray>& lse, const std::optional<InArray>& k,
                            const std::optional<InArray>& v, const std::optional<InArray>& rotary_cos,
                            const std::optional<InArray>& rotary_sin, bool rotary_interleaved,
                            const std::optional<InArray>& cache_batch_idx, const std::optional<InArray>& cache_leftpad,
                            const std::optional<InArray>& block_table, const std::string& page_layout,
                            std::optional<double> softmax_scale, bool causal, int64_t window_left, int64_t window_right,
                            int64_t sink_tokens, double softcap, const std::optional<InArray>& alibi_slopes,
                            const std::optional<InArray>& sink_logits, int num_splits, int64_t split_size,
                            bool check_device_data, const std::string& impl, int num_threads, uintptr_t stream,
                            const nb::object& workspace, bool size_only) {
  KvCacheParams p;
  if (q.ndim() != 4)
    fail(cat("q has ", q.ndim(), " dimensions (shape ", shape_str(q), "); expected 4: (batch, seqlen_q, heads_q, head_dim)"));
  Layout L;
  L.where = placement_of("q", q.device_type(), q.device_id());
  L.dtype = dtype_of("q", q);
  p.dtype = L.dtype;
  p.device = L.where.device;
  p.batch = static_cast<int64_t>(q.shape(0));
  p.seqlen_q = static_cast<int64_t>(q.shape(1));
  p.heads_q = static_cast<int64_t>(q.shape(2));
  p.head_dim = static_cast<int64_t>(q.shape(3));
  const bool append = k.has_value() || v.has_value();
  const CacheArray kc = cache_array("k_cache", k_cache, append), vc = cache_array("v_cache", v_cache, append);
  set_cache(kc, vc, cache_seqlens,
            {k, v, rotary_cos, rotary_sin, cache_batch_idx, cache_leftpad, block_table, rotary_interleaved, page_layout},
            L, &p);
  if (int64_t(kc.view().shape(3)) != p.head_dim)
    fail(cat("k_cache.shape[3] (head_dim) = ", kc.view().shape(3), " must equal q.shape[3] = ", p.head_dim));
  set_options({softmax_scale, causal, "bottom_right", window_left, window_right, softcap, 0.0, 0, 0, impl, num_threads,
               stream, sink_tokens},
              &p);
  if (alibi_slopes) set_alibi(*alibi_slopes, L, &p);
  if (sink_logits) p.sink_logits = sinks_ptr("sink_logits", *sink_logits, p, L);  // the training path's checks
  p.num_splits = num_splits;
  p.split_size = split_size;
  p.check_device_data = check_device_data;
  p.q = in_ref("q", q, "q", q, L);
  p.out = out_ref("out", out, "q", q, L);
  if (lse) set_lse(*lse, L, &p);
  int64_t bytes = 0;
  if (size_only) {
    throw_if_error(flashlab::kvcache_workspace_size(p, &bytes));
    return bytes;
  }
  nb::object keep;
  if (!workspace.is_none()) {
    throw_if_error(flashlab::kvcache_workspace_size(p, &bytes));
    provide_workspace(workspace, bytes, L, &p, &keep);
  }
  flashlab::Status st;
  {
    nb::gil_scoped_release release;
    st = flashlab::attention_with_kvcache(p);
  }
  throw_if_error(st);
  return bytes;
}

// The Python signatures of the two entry points over kvcache_call.
#define FLASHLAB_KVCACHE_ARGS                                                                                      \
  const InArray &q, nb::handle k_cache, nb::handle v_cache, const InArray &cache_seqlens, const OutArray &out,     \
      const std::optional<OutArray> &lse, const std::optional<InArray> &k, const std::optional<InArray> &v,        \
      const std::optional<InArray> &rotary_cos, const std::optional<InArray> &rotary_sin, bool rotary_interleaved, \
      const std::optional<InArray> &cache_batch_idx, const std::optional<InArray> &cache_leftpad,                  \
      const std::optional<InArray> &block_table, const std::string &page_layout,                                   \
      std::optional<double> softmax_scale, bool causal, int64_t window_left, int64_t window_right,                 \
      int64_t sink_tokens, double softcap, const std::optional<InArray> &alibi_slopes,                             \
      const std::optional<InArray> &sink_logits, int num_splits,                                                   \
      int64_t split_size, bool check_device_data, const std::string &impl, int num_threads, uintptr_t stream
#define FLASHLAB_KVCACHE_PASS                                                                                      \
  q, k_cache, v_cache, cache_seqlens, out, lse, k, v, rotary_cos, rotary_sin, rotary_interleaved, cache_batch_idx, \
      cache_leftpad, block_table, page_layout, softmax_scale, causal, window_left, window_right, sink_tokens,      \
      softcap,                                                                                                     \
      alibi_slopes, sink_logits, num_splits, split_size, check_device_data, impl, num_threads, stream

void attention_with_kvcache(FLASHLAB_KVCACHE_ARGS, const nb::object& workspace) {
  kvcache_call(FLASHLAB_KVCACHE_PASS, workspace, false);
}

int64_t kvcache_workspace_size(FLASHLAB_KVCACHE_ARGS) { return kvcache_call(FLASHLAB_KVCACHE_PASS, nb::none(), true); }

void kvcache_append(nb::handle k_cache, nb::handle v_cache, const InArray& cache_seqlens, const InArray& k,
                    const InArray& v, const std::optional<InArray>& rotary_cos,
                    const std::optional<InArray>& rotary_sin, bool rotary_interleaved,
                    const std::optional<InArray>& cache_batch_idx, const std::optional<InArray>& cache_leftpad,
                    const std::optional<InArray>& block_table, const std::string& page_layout, int num_threads,
                    uintptr_t stream) {
  KvCacheParams p;
  const CacheArray kc = cache_array("k_cache", k_cache, true), vc = cache_array("v_cache", v_cache, true);
  const InArray kv = kc.view();
  Layout L;
  L.where = placement_of("k_cache", kv.device_type(), kv.device_id());
  if (cache_seqlens.ndim() != 1) fail(cat("cache_seqlens.shape ", shape_str(cache_seqlens), " must be (batch,)"));
  p.batch = static_cast<int64_t>(cache_seqlens.shape(0));
  p.device = L.where.device;
  set_cache(kc, vc, cache_seqlens, {k, v, rotary_cos, rotary_sin, cache_batch_idx, cache_leftpad, block_table,
                                    rotary_interleaved, page_layout},
            L, &p);
  p.dtype = L.dtype = p.cache_dtype;
  p.heads_q = p.heads_kv;
  p.head_dim = static_cast<int64_t>(kv.shape(3));
  p.seqlen_q = 0;
  p.num_threads = num_threads;
  p.stream = reinterpret_cast<void*>(stream);
  flashlab::Status st;
  {
    nb::gil_scoped_release release;
    st = flashlab::kvcache_append(p);
  }
  throw_if_error(st);
}

void attention_combine(const InArray& out_partial, const InArray& lse_partial, const OutArray& out,
                       const std::optional<OutArray>& lse, int num_threads, uintptr_t stream,
                       const nb::object& /*workspace: none needed; accepted like the other calls*/) {
  flashlab::CombineParams p;
  const InArray& op = out_partial;
  const InArray& lp = lse_partial;
  if (op.ndim() != 5)
    fail(cat("out_partial.shape ", shape_str(op), " must be (num_splits, batch, seqlen_q, heads, head_dim)"));
  Layout L;
  L.where = placement_of("out_partial", op.device_type(), op.device_id());
  if (!is(op.dtype(), nb::dlpack::dtype_code::Float, 32))
    fail(cat("out_partial.dtype (", dtype_str(op.dtype()), ") must be float32"));
  p.num_splits = op.shape(0);
  p.batch = op.shape(1);
  p.seqlen_q = op.shape(2);
  p.heads = op.shape(3);
  p.head_dim = op.shape(4);
  if (p.head_dim > 1 && op.stride(4) != 1) fail(cat("out_partial.stride(4) (", op.stride(4), ") must be 1"));
  p.out_partial = static_cast<const float*>(op.data());
  p.out_partial_split_stride = op.stride(0);
  p.out_partial_batch_stride = op.stride(1);
  p.out_partial_row_stride = op.stride(2);
  p.out_partial_head_stride = op.stride(3);

  if (!is(lp.dtype(), nb::dlpack::dtype_code::Float, 32))
    fail(cat("lse_partial.dtype (", dtype_str(lp.dtype()), ") must be float32"));
  if (lp.ndim() != 4 || int64_t(lp.shape(0)) != p.num_splits || int64_t(lp.shape(1)) != p.batch ||
      int64_t(lp.shape(2)) != p.heads || int64_t(lp.shape(3)) != p.seqlen_q)
    fail(cat("lse_partial.shape ", shape_str(lp), " must be (num_splits, batch, heads, seqlen_q) = (", p.num_splits,
             ", ", p.batch, ", ", p.heads, ", ", p.seqlen_q, ")"));
  if (p.seqlen_q > 1 && lp.stride(3) != 1) fail(cat("lse_partial.stride(3) (", lp.stride(3), ") must be 1"));
  check_placement("lse_partial", lp.device_type(), lp.device_id(), L);
  p.lse_partial = static_cast<const float*>(lp.data());
  p.lse_partial_split_stride = lp.stride(0);
  p.lse_partial_batch_stride = lp.stride(1);
  p.lse_partial_head_stride = lp.stride(2);

  const InArray o(out);
  if (o.ndim() != 4 || int64_t(o.shape(0)) != p.batch || int64_t(o.shape(1)) != p.seqlen_q ||
      int64_t(o.shape(2)) != p.heads || int64_t(o.shape(3)) != p.head_dim)
    fail(cat("out.shape ", shape_str(o), " must be (batch, seqlen_q, heads, head_dim) = (", p.batch, ", ", p.seqlen_q,
             ", ", p.heads, ", ", p.head_dim, ")"));
  check_placement("out", o.device_type(), o.device_id(), L);
  p.dtype = dtype_of("out", o);
  p.out = ref4<flashlab::MutTensorRef>(out.data(), o, 1, 2);
  if (lse) {
    const InArray l(*lse);
    if (!is(l.dtype(), nb::dlpack::dtype_code::Float, 32)) fail(cat("lse.dtype (", dtype_str(l.dtype()), ") must be float32"));
    if (l.ndim() != 3 || int64_t(l.shape(0)) != p.batch || int64_t(l.shape(1)) != p.heads ||
        int64_t(l.shape(2)) != p.seqlen_q)
      fail(cat("lse.shape ", shape_str(l), " must be (batch, heads, seqlen_q) = (", p.batch, ", ", p.heads, ", ",
               p.seqlen_q, ")"));
    if (p.seqlen_q > 1 && l.stride(2) != 1) fail(cat("lse.stride(2) (", l.stride(2), ") must be 1"));
    check_placement("lse", l.device_type(), l.device_id(), L);
    p.lse = static_cast<float*>(lse->data());
    p.lse_batch_stride = l.stride(0);
    p.lse_head_stride = l.stride(1);
  }
  p.device = L.where.device;
  p.num_threads = num_threads;
  p.stream = reinterpret_cast<void*>(stream);
  flashlab::Status st;
  {
    nb::gil_scoped_release release;
    st = flashlab::attention_combine(p);
  }
  throw_if_error(st);
}

}  // namespace

void bind_kvcache(nb::module_& m) {
  m.def("attention_with_kvcache", &attention_with_kvcache, "q"_a, "k_cache"_a, "v_cache"_a, "cache_seqlens"_a,
        "out"_a.noconvert(), "lse"_a.noconvert() = nb::none(), nb::kw_only(), "k"_a = nb::none(), "v"_a = nb::none(),
        "rotary_cos"_a = nb::none(), "rotary_sin"_a = nb::none(), "rotary_interleaved"_a = false,
        "cache_batch_idx"_a = nb::none(), "cache_leftpad"_a = nb::none(), "block_table"_a = nb::none(),
        "page_layout"_a = "NHD", "softmax_scale"_a = nb::none(), "causal"_a = false, "window_left"_a = -1,
        "window_right"_a = -1, "sink_tokens"_a = 0, "softcap"_a = 0.0, "alibi_slopes"_a = nb::none(), "sink_logits"_a = nb::none(),
        "num_splits"_a = 0, "split_size"_a = 0, "check_device_data"_a = false, "impl"_a = "auto",
        "num_threads"_a = 0, "stream"_a = 0, "workspace"_a = nb::none(),
        "Attention against a K/V cache (docs/kvcache.md): appends k/v (rotary applied to k) into k_cache/v_cache in "
        "place at slots cache_seqlens[b].., then writes out (like q) and, when given, lse (batch, heads_q, seqlen_q) "
        "fp32. Caches: (batch_cache, seqlen, heads_kv, head_dim), or pages with block_table (page_layout NHD: "
        "(num_pages, page_size, heads_kv, head_dim); HND: (num_pages, heads_kv, page_size, head_dim)). int32 "
        "cache_seqlens / cache_batch_idx / cache_leftpad (batch,), block_table (batch, max_pages); rotary_cos/sin "
        "fp32, bf16 or fp16 (rotary_max_pos, rotary_dim / 2). sink_tokens: StreamingLLM sink tokens, the first keys after "
        "cache_leftpad visible left of the window (CPU only). sink_logits: fp32 (heads_q,) attention sinks (in "
        "every row's softmax denominator, no value). check_device_data: on CUDA copy the int32 side arrays to the host and "
        "check them before anything runs (synchronizes the stream; not capturable in a CUDA graph); the CPU "
        "always checks them.");
  m.def("kvcache_workspace_size", &kvcache_workspace_size, "q"_a, "k_cache"_a, "v_cache"_a, "cache_seqlens"_a,
        "out"_a.noconvert(), "lse"_a.noconvert() = nb::none(), nb::kw_only(), "k"_a = nb::none(), "v"_a = nb::none(),
        "rotary_cos"_a = nb::none(), "rotary_sin"_a = nb::none(), "rotary_interleaved"_a = false,
        "cache_batch_idx"_a = nb::none(), "cache_leftpad"_a = nb::none(), "block_table"_a = nb::none(),
        "page_layout"_a = "NHD", "softmax_scale"_a = nb::none(), "causal"_a = false, "window_left"_a = -1,
        "window_right"_a = -1, "sink_tokens"_a = 0, "softcap"_a = 0.0, "alibi_slopes"_a = nb::none(), "sink_logits"_a = nb::none(),
        "num_splits"_a = 0, "split_size"_a = 0, "check_device_data"_a = false, "impl"_a = "auto",
        "num_threads"_a = 0, "stream"_a = 0,
        "The workspace bytes attention_with_kvcache needs for these arguments (0 on the CPU): the same checks, "
        "nothing run or written. On CUDA only shapes and options matter (device data is not read unless "
        "check_device_data), so a plan made once with placeholder tensors of the final shapes holds for every "
        "later call.");
  m.def("kvcache_append", &kvcache_append, "k_cache"_a, "v_cache"_a, "cache_seqlens"_a, "k"_a, "v"_a, nb::kw_only(),
        "rotary_cos"_a = nb::none(), "rotary_sin"_a = nb::none(), "rotary_interleaved"_a = false,
        "cache_batch_idx"_a = nb::none(), "cache_leftpad"_a = nb::none(), "block_table"_a = nb::none(),
        "page_layout"_a = "NHD", "num_threads"_a = 0, "stream"_a = 0,
        "The append step of attention_with_kvcache alone (rotary on k): k/v written into the caches in place.");
  m.def("attention_combine", &attention_combine, "out_partial"_a, "lse_partial"_a, "out"_a.noconvert(),
        "lse"_a.noconvert() = nb::none(), nb::kw_only(), "num_threads"_a = 0, "stream"_a = 0,
        "workspace"_a = nb::none(),
        "Merges split-KV partials, LSE-exact: out_partial (num_splits, batch, seqlen_q, heads, head_dim) fp32 and "
        "lse_partial (num_splits, batch, heads, seqlen_q) fp32 -> out (batch, seqlen_q, heads, head_dim) and lse "
        "(batch, heads, seqlen_q) fp32. All -inf splits: out 0, lse -inf.");
}

}  // namespace flashlab_py
