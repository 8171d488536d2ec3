// python/src/tensor_args.h — from DLPack tensors (nanobind ndarrays) to flashlab's plain params.
//
// Everything here reads what a DLPack tensor says about itself — shape, element strides, dtype,
// device — and writes it unchanged into FwdParams / BwdParams. Rules the C++ library already checks
// (the last stride must be 1, heads_q a multiple of heads_kv, the implementation's limits, ...)
// are left to it, so Python sees the same Status messages as C++ callers. What only this layer
// knows (how many dimensions a tensor has, whether two tensors agree on a size, dtype names,
// which device a tensor lives on) is checked here, with messages that name the argument.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <exception>
#include <optional>
#include <string>

#include "flashlab/flashlab.h"
#include "options.h"

namespace flashlab_py {

namespace nb = nanobind;

// Inputs may be read-only (NumPy); outputs must be writable. No implicit conversions: a tensor
// is used in place or rejected, never silently copied.
using InArray = nb::ndarray<nb::ro>;
using OutArray = nb::ndarray<>;

// Where a tensor lives, as flashlab names it.
struct Placement {
  flashlab::Device device = flashlab::Device::kCPU;
  int device_id = 0;
};

// The problem read off q, k, v (and cu_seqlens for variable-length batches): sizes, dtype,
// device. Fixed-length tensors are 4-D (batch, seqlen, heads, head_dim); variable-length ones
// 3-D (total_tokens, heads, head_dim).
struct Layout {
  bool varlen = false;
  Placement where;
  flashlab::DType dtype = flashlab::DType::kFloat32;
};

// Reads sizes, dtype and device from q, k, v into `c`; checks that the three agree.
Layout read_layout(const InArray& q, const InArray& k, const InArray& v,
                   const std::optional<InArray>& cu_seqlens_q, const std::optional<InArray>& cu_seqlens_k,
                   std::optional<int64_t> max_seqlen_q, std::optional<int64_t> max_seqlen_k,
                   flashlab::AttentionConfig* c);

// The strides of a q-like tensor; `like` names the tensor whose shape it must have.
flashlab::TensorRef in_ref(const char* name, const InArray& a, const char* like, const InArray& shape_of,
                           const Layout& L);
flashlab::MutTensorRef out_ref(const char* name, const OutArray& a, const char* like, const InArray& shape_of,
                               const Layout& L);

// LSE: (batch, heads_q, seqlen_q), or (heads_q, total_q) for variable-length batches; fp32.
struct LseRef {
  void* ptr = nullptr;
  int64_t batch_stride = 0;
  int64_t head_stride = 0;
};
LseRef lse_ref(const nb::ndarray<nb::ro>& lse, const flashlab::AttentionConfig& c, const Layout& L);
// p->lse and its strides from `lse` (FwdParams, KvCacheParams: any params with those fields).
template <typename P>
void set_lse(const OutArray& lse, const Layout& L, P* p) {
  const LseRef r = lse_ref(nb::ndarray<nb::ro>(lse), *p, L);
  p->lse = static_cast<float*>(r.ptr);
  p->lse_batch_stride = r.batch_stride;
  p->lse_head_stride = r.head_stride;
}

// Calls `allocator(nbytes)` for the device scratch an implementation asks for (cuda_sm80's
// backward, the CUDA KV-cache path's split partials; the CUDA learning kernels take theirs with
// stream-ordered cudaMallocAsync). The returned DLPack object is kept in `*keep` until the call
// returns.
void provide_workspace(const nb::object& allocator, int64_t bytes, const Layout& L, flashlab::AttentionConfig* c,
                       nb::object* keep);

// ALiBi slopes, (heads_q,) or (batch, heads_q) fp32: sets c->alibi_slopes and its batch stride.
void set_alibi(const InArray& slopes, const Layout& L, flashlab::AttentionConfig* c);

// Per-head fp32 vectors of attention sinks, (heads_q,) contiguous: sink_logits (input) and the
// backward's dsink (output). Return the data pointer after checking dtype, shape and placement.
const float* sinks_ptr(const char* name, const InArray& a, const flashlab::AttentionConfig& c, const Layout& L);

// Small helpers shared with kvcache.cpp: "(2, 3)", "bfloat16", a dtype test, flashlab's DType of
// a float tensor (anything else fails naming `name`), and where a tensor lives.
std::string shape_str(const nb::ndarray<nb::ro>& a);
std::string dtype_str(nb::dlpack::dtype d);
bool is(nb::dlpack::dtype d, nb::dlpack::dtype_code code, int bits);
flashlab::DType dtype_of(const char* name, const InArray& a);
Placement placement_of(const char* name, int device_type, int device_id);
std::string placement_str(const Placement& p);

// Checks that `a` lives where q does (same device type and ordinal).
void check_placement(const char* name, int device_type, int device_id, const Layout& L);

// Registers attention_with_kvcache, kvcache_append and attention_combine (kvcache.cpp).
void bind_kvcache(nb::module_& m);

}  // namespace flashlab_py
