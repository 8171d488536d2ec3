// python/src/tensor_args.cpp — see tensor_args.h.
#include "tensor_args.h"

#include <cmath>
#include <sstream>
#include <vector>

namespace flashlab_py {

using flashlab::AttentionConfig;
using flashlab::Device;
using flashlab::DType;

namespace {

template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

}  // namespace

std::string shape_str(const nb::ndarray<nb::ro>& a) {
  std::string s = "(";
  for (size_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

std::string dtype_str(nb::dlpack::dtype d) {
  const char* kind = "?";
  switch (static_cast<nb::dlpack::dtype_code>(d.code)) {
    case nb::dlpack::dtype_code::Int: kind = "int"; break;
    case nb::dlpack::dtype_code::UInt: kind = "uint"; break;
    case nb::dlpack::dtype_code::Float: kind = "float"; break;
    case nb::dlpack::dtype_code::Bfloat: kind = "bfloat"; break;
    case nb::dlpack::dtype_code::Complex: kind = "complex"; break;
    case nb::dlpack::dtype_code::Bool: kind = "bool"; break;
  }
  return cat(kind, int(d.bits), d.lanes != 1 ? cat("x", d.lanes) : std::string());
}

bool is(nb::dlpack::dtype d, nb::dlpack::dtype_code code, int bits) {
  return d.code == static_cast<uint8_t>(code) && d.bits == bits && d.lanes == 1;
}

DType dtype_of(const char* name, const InArray& a) {
  const nb::dlpack::dtype d = a.dtype();
  if (is(d, nb::dlpack::dtype_code::Float, 32)) return DType::kFloat32;
  if (is(d, nb::dlpack::dtype_code::Float, 16)) return DType::kFloat16;
  if (is(d, nb::dlpack::dtype_code::Bfloat, 16)) return DType::kBFloat16;
  fail(cat(name, ".dtype (", dtype_str(d), ") is not supported: use float32, float16 or bfloat16"));
}

Placement placement_of(const char* name, int device_type, int device_id) {
  switch (device_type) {
    case nb::device::cpu::value:
    case nb::device::cuda_host::value:  // pinned host memory: the CPU backends read it directly
      return {Device::kCPU, 0};
    case nb::device::cuda::value:
    case nb::device::cuda_managed::value:
      return {Device::kCUDA, device_id};
  }
  fail(cat(name, " is on DLPack device type ", device_type, ": flashlab supports cpu and cuda tensors"));
}

std::string placement_str(const Placement& p) {
  return p.device == Device::kCPU ? std::string("cpu") : cat("cuda:", p.device_id);
}

namespace {

void check_ndim(const char* name, const InArray& a, size_t want, bool varlen) {
  if (a.ndim() == want) return;
  fail(cat(name, " has ", a.ndim(), " dimensions (shape ", shape_str(a), "); expected ", want, ": ",
           varlen ? "(total_tokens, heads, head_dim) with cu_seqlens" : "(batch, seqlen, heads, head_dim)"));
}

void check_dim(const char* name, const InArray& a, size_t dim, const char* what, const char* like,
               const InArray& b, size_t bdim) {
  if (a.shape(dim) == b.shape(bdim)) return;
  fail(cat(name, ".shape[", dim, "] (", what, ") = ", a.shape(dim), " must equal ", like, ".shape[", bdim,
           "] = ", b.shape(bdim)));
}

// cu_seqlens: int32, 1-D, contiguous, on q's device.
const int32_t* cu_seqlens(const char* name, const InArray& a, const Layout& L) {
  if (!is(a.dtype(), nb::dlpack::dtype_code::Int, 32))
    fail(cat(name, ".dtype (", dtype_str(a.dtype()), ") must be int32"));
  if (a.ndim() != 1 || a.shape(0) < 2)
    fail(cat(name, ".shape ", shape_str(a), " must be (batch + 1,) with batch >= 1"));
  if (a.shape(0) > 1 && a.stride(0) != 1) fail(cat(name, " must be contiguous (stride ", a.stride(0), ")"));
  check_placement(name, a.device_type(), a.device_id(), L);
  return static_cast<const int32_t*>(a.data());
}

}  // namespace

void check_placement(const char* name, int device_type, int device_id, const Layout& L) {
  const Placement p = placement_of(name, device_type, device_id);
  if (p.device != L.where.device || p.device_id != L.where.device_id)
    fail(cat(name, " is on ", placement_str(p), " but q is on ", placement_str(L.where)));
}

Layout read_layout(const InArray& q, const InArray& k, const InArray& v, const std::optional<InArray>& cu_seqlens_q,
                   const std::optional<InArray>& cu_seqlens_k, std::optional<int64_t> max_seqlen_q,
                   std::optional<int64_t> max_seqlen_k, AttentionConfig* c) {
  Layout L;
  if (cu_seqlens_q.has_value() != cu_seqlens_k.has_value())
    fail("cu_seqlens_q and cu_seqlens_k must be given together (variable-length batch) or not at all");
  L.varlen = cu_seqlens_q.has_value();
  const size_t nd = L.varlen ? 3 : 4;
  check_ndim("q", q, nd, L.varlen);
  check_ndim("k", k, nd, L.varlen);
  check_ndim("v", v, nd, L.varlen);
  L.where = placement_of("q", q.device_type(), q.device_id());
  check_placement("k", k.device_type(), k.device_id(), L);
  check_placement("v", v.device_type(), v.device_id(), L);
  L.dtype = dtype_of("q", q);
  if (dtype_of("k", k) != L.dtype || dtype_of("v", v) != L.dtype)
    fail(cat("q, k, v must have one dtype; got ", dtype_str(q.dtype()), ", ", dtype_str(k.dtype()), ", ",
             dtype_str(v.dtype())));
  // q is the anchor: k is checked against q first, then v against k (and v's head_dim against q),
  // so that a wrong size is blamed on the tensor that has it.
  check_dim("k", k, nd - 1, "head_dim", "q", q, nd - 1);
  if (!L.varlen) check_dim("k", k, 0, "batch", "q", q, 0);
  static const char* const kDimNames[2][3] = {{"batch", "seqlen_k", "heads_kv"}, {"total_k", "heads_kv", ""}};
  for (size_t d = 0; d + 1 < nd; ++d) check_dim("v", v, d, kDimNames[L.varlen][d], "k", k, d);
  check_dim("v", v, nd - 1, "head_dim", "q", q, nd - 1);

  c->dtype = L.dtype;
  c->device = L.where.device;
  c->heads_q = static_cast<int64_t>(q.shape(nd - 2));
  c->heads_kv = static_cast<int64_t>(k.shape(nd - 2));
  c->head_dim = static_cast<int64_t>(q.shape(nd - 1));
  if (!L.varlen) {
    if (max_seqlen_q || max_seqlen_k) fail("max_seqlen_q / max_seqlen_k are only used with cu_seqlens");
    c->batch = static_cast<int64_t>(q.shape(0));
    c->seqlen_q = static_cast<int64_t>(q.shape(1));
    c->seqlen_k = static_cast<int64_t>(k.shape(1));
    return L;
  }
  if (!max_seqlen_q || !max_seqlen_k) fail("max_seqlen_q and max_seqlen_k are required with cu_seqlens");
  c->cu_seqlens_q = cu_seqlens("cu_seqlens_q", *cu_seqlens_q, L);
  c->cu_seqlens_k = cu_seqlens("cu_seqlens_k", *cu_seqlens_k, L);
  c->total_q = static_cast<int64_t>(q.shape(0));  // packed rows (cuda_sm90's TMA descriptors span them)
  c->total_k = static_cast<int64_t>(k.shape(0));
  if (cu_seqlens_q->shape(0) != cu_seqlens_k->shape(0))
    fail(cat("cu_seqlens_q has ", cu_seqlens_q->shape(0), " entries but cu_seqlens_k has ", cu_seqlens_k->shape(0),
             ": both are (batch + 1,)"));
  c->batch = static_cast<int64_t>(cu_seqlens_q->shape(0)) - 1;
  c->seqlen_q = *max_seqlen_q;
  c->seqlen_k = *max_seqlen_k;
  // The C++ library checks each sequence against max_seqlen, but only this layer knows how many
  // rows the packed tensors hold. Host offsets can be read here; device ones cannot without a
  // synchronization, so on CUDA they are trusted (as in flash-attn).
  if (L.where.device == Device::kCPU) {
    const int64_t total_q = c->cu_seqlens_q[c->batch], total_k = c->cu_seqlens_k[c->batch];
    if (total_q > static_cast<int64_t>(q.shape(0)))
      fail(cat("cu_seqlens_q[-1] (", total_q, ") exceeds q.shape[0] (", q.shape(0), " tokens)"));
    if (total_k > static_cast<int64_t>(k.shape(0)))
      fail(cat("cu_seqlens_k[-1] (", total_k, ") exceeds k.shape[0] (", k.shape(0), " tokens)"));
  }
  return L;
}

namespace {
template <typename Ref, typename Array>
Ref make_ref(const char* name, const Array& a, const char* like, const InArray& shape_of, const Layout& L) {
  const InArray view(a);
  if (view.ndim() != shape_of.ndim() || [&] {
        for (size_t d = 0; d < view.ndim(); ++d)
          if (view.shape(d) != shape_of.shape(d)) return true;
        return false;
      }())
    fail(cat(name, ".shape ", shape_str(view), " must equal ", like, ".shape ", shape_str(shape_of)));
  check_placement(name, view.device_type(), view.device_id(), L);
  if (dtype_of(name, view) != L.dtype)
    fail(cat(name, ".dtype (", dtype_str(view.dtype()), ") must equal q.dtype (", dtype_str(shape_of.dtype()), ")"));
  Ref r;
  r.ptr = a.data();
  const size_t nd = view.ndim();
  // Fixed length: (batch, seqlen, heads, head_dim). Varlen: (tokens, heads, head_dim), no batch.
  r.batch_stride = L.varlen ? 0 : view.stride(0);
  r.row_stride = view.stride(nd - 3);
  r.head_stride = view.stride(nd - 2);
  // A size-1 head_dim has no meaningful stride (DLPack producers may report anything).
  r.dim_stride = view.shape(nd - 1) == 1 ? 1 : view.stride(nd - 1);
  return r;
}
}  // namespace

flashlab::TensorRef in_ref(const char* name, const InArray& a, const char* like, const InArray& shape_of,
                           const Layout& L) {
  return make_ref<flashlab::TensorRef>(name, a, like, shape_of, L);
}

flashlab::MutTensorRef out_ref(const char* name, const OutArray& a, const char* like, const InArray& shape_of,
                               const Layout& L) {
  return make_ref<flashlab::MutTensorRef>(name, a, like, shape_of, L);
}

LseRef lse_ref(const InArray& lse, const AttentionConfig& c, const Layout& L) {
  if (!is(lse.dtype(), nb::dlpack::dtype_code::Float, 32))
    fail(cat("lse.dtype (", dtype_str(lse.dtype()), ") must be float32"));
  check_placement("lse", lse.device_type(), lse.device_id(), L);
  LseRef r;
  r.ptr = const_cast<void*>(static_cast<const void*>(lse.data()));
  if (!L.varlen) {
    const bool ok = lse.ndim() == 3 && int64_t(lse.shape(0)) == c.batch && int64_t(lse.shape(1)) == c.heads_q &&
                    int64_t(lse.shape(2)) == c.seqlen_q;
    if (!ok)
      fail(cat("lse.shape ", shape_str(lse), " must be (batch, heads_q, seqlen_q) = (", c.batch, ", ", c.heads_q,
               ", ", c.seqlen_q, ")"));
    if (c.seqlen_q > 1 && lse.stride(2) != 1)
      fail(cat("lse.stride(2) (", lse.stride(2), ") must be 1: each row of LSE is contiguous"));
    r.batch_stride = lse.stride(0);
    r.head_stride = lse.stride(1);
    return r;
  }
  // Varlen: (heads_q, total_q); `total_q` is whatever the caller packed, at least cu_seqlens_q[-1].
  if (lse.ndim() != 2 || int64_t(lse.shape(0)) != c.heads_q)
    fail(cat("lse.shape ", shape_str(lse), " must be (heads_q, total_q) with heads_q = ", c.heads_q,
             " for a variable-length batch"));
  if (lse.shape(1) > 1 && lse.stride(1) != 1)
    fail(cat("lse.stride(1) (", lse.stride(1), ") must be 1: each row of LSE is contiguous"));
  if (L.where.device == Device::kCPU && int64_t(lse.shape(1)) < c.cu_seqlens_q[c.batch])
    fail(cat("lse.shape[1] (", lse.shape(1), ") is less than cu_seqlens_q[-1] (", c.cu_seqlens_q[c.batch], ")"));
  r.head_stride = lse.stride(0);
  return r;
}

void set_alibi(const InArray& slopes, const Layout& L, AttentionConfig* c) {
  if (!is(slopes.dtype(), nb::dlpack::dtype_code::Float, 32))
    fail(cat("alibi_slopes.dtype (", dtype_str(slopes.dtype()), ") must be float32"));
  check_placement("alibi_slopes", slopes.device_type(), slopes.device_id(), L);
  const size_t nd = slopes.ndim();
  const bool ok = (nd == 1 && int64_t(slopes.shape(0)) == c->heads_q) ||
                  (nd == 2 && int64_t(slopes.shape(0)) == c->batch && int64_t(slopes.shape(1)) == c->heads_q);
  if (!ok)
    fail(cat("alibi_slopes.shape ", shape_str(slopes), " must be (heads_q,) = (", c->heads_q,
             ",) or (batch, heads_q) = (", c->batch, ", ", c->heads_q, ")"));
  if (c->heads_q > 1 && slopes.stride(nd - 1) != 1)
    fail(cat("alibi_slopes.stride(", nd - 1, ") (", slopes.stride(nd - 1), ") must be 1"));
  c->alibi_slopes = static_cast<const float*>(slopes.data());
  c->alibi_batch_stride = nd == 2 ? slopes.stride(0) : 0;
}

const float* sinks_ptr(const char* name, const InArray& a, const AttentionConfig& c, const Layout& L) {
  if (!is(a.dtype(), nb::dlpack::dtype_code::Float, 32))
    fail(cat(name, ".dtype (", dtype_str(a.dtype()), ") must be float32"));
  check_placement(name, a.device_type(), a.device_id(), L);
  if (a.ndim() != 1 || int64_t(a.shape(0)) != c.heads_q)
    fail(cat(name, ".shape ", shape_str(a), " must be (heads_q,) = (", c.heads_q, ",)"));
  if (c.heads_q > 1 && a.stride(0) != 1) fail(cat(name, ".stride(0) (", a.stride(0), ") must be 1"));
  return static_cast<const float*>(a.data());
}

void provide_workspace(const nb::object& allocator, int64_t bytes, const Layout& L, flashlab::AttentionConfig* c,
                       nb::object* keep) {
  if (allocator.is_none() || bytes <= 0) return;
  *keep = allocator(bytes);
  OutArray w = nb::cast<OutArray>(*keep);
  check_placement("workspace", w.device_type(), w.device_id(), L);
  if (static_cast<int64_t>(w.nbytes()) < bytes)
    fail("workspace allocator returned " + std::to_string(w.nbytes()) + " bytes; " + std::to_string(bytes) +
         " were asked for");
  c->workspace = w.data();
  c->workspace_bytes = bytes;
}

}  // namespace flashlab_py
