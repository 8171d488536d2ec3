// src/api/validate.cpp — generic argument checks. Order: scalars and sizes first (so later rules
// can rely on them), then variable-length offsets, then every tensor (pointer, strides, extent).
#include "api/validate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "api/device.h"
#include "common/problem.h"

namespace flashlab {
namespace detail {
namespace {

template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

Status invalid(const std::string& m) { return Status::Invalid(m); }

// a*b and a+b with overflow detection (all sizes are int64 element counts or offsets).
bool mul_ok(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool add_ok(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }

struct Dim {
  int64_t extent;
  int64_t stride;
};

// Checks one (batch, rows, heads, head_dim) tensor: pointer, strides, largest offset in int64
// (also in bytes), and — for outputs — that no two logical elements share memory.
Status check_tensor(const char* name, const void* ptr, int64_t batch_stride, int64_t row_stride,
                    int64_t head_stride, int64_t dim_stride, int64_t batch, int64_t rows,
                    int64_t heads, int64_t head_dim, int64_t elem_size, bool is_output) {
  if (ptr == nullptr) return invalid(cat(name, " is null"));
  if (reinterpret_cast<uintptr_t>(ptr) % elem_size != 0)
    return invalid(cat(name, " is not aligned to its element size (", elem_size, " bytes)"));
  if (dim_stride != 1)
    return invalid(cat(name, ".dim_stride (", dim_stride,
                       ") must be 1: the last dimension (head_dim) must be contiguous"));
  if (batch_stride < 0 || row_stride < 0 || head_stride < 0)
    return invalid(cat(name, " strides (batch ", batch_stride, ", row ", row_stride, ", head ",
                       head_stride, ") must be non-negative"));
  Dim dims[4] = {{batch, batch_stride}, {rows, row_stride}, {heads, head_stride}, {head_dim, 1}};
  for (const Dim& d : dims)
    if (d.extent <= 0) return Status::Ok();  // empty (e.g. a varlen batch of empty sequences)
  int64_t max_off = 0;
  for (const Dim& d : dims) {
    int64_t t;
    if (!mul_ok(d.extent - 1, d.stride, &t) || !add_ok(max_off, t, &max_off))
      return invalid(cat(name, ": the largest element offset overflows int64 (sizes x strides too large)"));
  }
  int64_t bytes;
  if (!mul_ok(max_off + 1, elem_size, &bytes))
    return invalid(cat(name, ": the tensor's extent in bytes overflows int64"));
  if (is_output) {
    // Sort the dims of extent > 1 by stride; each stride must step over everything inside it.
    Dim live[4];
    int n = 0;
    for (const Dim& d : dims)
      if (d.extent > 1) live[n++] = d;
    for (int i = 1; i < n; ++i)  // insertion sort by stride (n <= 4)
      for (int j = i; j > 0 && live[j].stride < live[j - 1].stride; --j) std::swap(live[j], live[j - 1]);
    int64_t span = 1;  // elements covered by the dims inside the current one
    for (int i = 0; i < n; ++i) {
      if (live[i].stride < span)
        return invalid(cat(name, " strides (batch ", batch_stride, ", row ", row_stride, ", head ",
                           head_stride, ") make output elements overlap"));
      span = live[i].stride * (live[i].extent - 1) + span;
    }
  }
  return Status::Ok();
}

bool is_known_dtype(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16 || d == DType::kFloat8E4M3;
}

}  // namespace

Status unsupported_value(const char* what, int64_t value, const char* impl_name, const std::string& supported) {
  return Status::Unsupported(cat(what, " (", value, ") is not supported by impl ", impl_name,
                                 ": supported ", supported));
}

Status validate_config(const AttentionConfig& c) {
  if (!is_known_dtype(c.dtype)) return invalid(cat("dtype (", static_cast<int>(c.dtype), ") is not a DType"));
  if (c.dtype == DType::kFloat8E4M3)
    return Status::Unsupported("dtype fp8_e4m3 is reserved: no implementation supports it yet");
  if (c.device != Device::kCPU && c.device != Device::kCUDA)
    return invalid(cat("device (", static_cast<int>(c.device), ") is not a Device"));
  if (c.device == Device::kCUDA && !cuda_compiled())
    return Status::Unsupported("device cuda: this build of flashlab has no CUDA support");

  const bool varlen = c.cu_seqlens_q != nullptr || c.cu_seqlens_k != nullptr;
  if ((c.cu_seqlens_q == nullptr) != (c.cu_seqlens_k == nullptr))
    return invalid("cu_seqlens_q and cu_seqlens_k must both be set (variable-length batch) or both be null");
  if (c.batch <= 0) return invalid(cat("batch (", c.batch, ") must be positive"));
  const int64_t min_len = varlen ? 0 : 1;  // with cu_seqlens they are upper bounds; all may be empty
  if (c.seqlen_q < min_len) return invalid(cat("seqlen_q (", c.seqlen_q, ") must be >= ", min_len));
  if (c.seqlen_k < min_len) return invalid(cat("seqlen_k (", c.seqlen_k, ") must be >= ", min_len));
  if (c.heads_q <= 0) return invalid(cat("heads_q (", c.heads_q, ") must be positive"));
  if (c.heads_kv <= 0) return invalid(cat("heads_kv (", c.heads_kv, ") must be positive"));
  if (c.heads_q % c.heads_kv != 0)
    return invalid(cat("heads_q (", c.heads_q, ") must be a multiple of heads_kv (", c.heads_kv, ")"));
  if (c.head_dim <= 0) return invalid(cat("head_dim (", c.head_dim, ") must be positive"));
  // Work counts (batch * heads * seqlen_q * seqlen_k) must fit int64 for every backend's indexing.
  int64_t t;
  if (!mul_ok(c.batch, c.heads_q, &t) || !mul_ok(t, c.seqlen_q, &t) || !mul_ok(t, c.seqlen_k, &t) ||
      !mul_ok(t, c.head_dim, &t))
    return invalid("batch * heads_q * seqlen_q * seqlen_k * head_dim overflows int64");

  if (std::isinf(c.softmax_scale)) return invalid("softmax_scale must be finite (NaN selects 1/sqrt(head_dim))");
  if (!(c.softcap >= 0.0f) || std::isinf(c.softcap))
    return invalid(cat("softcap (", c.softcap, ") must be finite and >= 0 (0 disables it)"));
  if (c.causal_align != CausalAlign::kBottomRight && c.causal_align != CausalAlign::kTopLeft)
    return invalid(cat("causal_align (", static_cast<int>(c.causal_align), ") is not a CausalAlign"));
  if (c.sink_tokens < 0) return invalid(cat("sink_tokens (", c.sink_tokens, ") must be >= 0 (0 = off)"));
  if (c.window_left < -1) return invalid(cat("window_left (", c.window_left, ") must be >= -1 (-1 = unbounded)"));
  if (c.window_right < -1) return invalid(cat("window_right (", c.window_right, ") must be >= -1 (-1 = unbounded)"));
  if (!(c.dropout_p >= 0.0f && c.dropout_p < 1.0f))
    return invalid(cat("dropout_p (", c.dropout_p, ") must be in [0, 1)"));
  if (c.alibi_batch_stride < 0)
    return invalid(cat("alibi_batch_stride (", c.alibi_batch_stride, ") must be >= 0"));
  if (c.num_threads < 0) return invalid(cat("num_threads (", c.num_threads, ") must be >= 0 (0 = all)"));
  if (c.workspace_bytes < 0) return invalid(cat("workspace_bytes (", c.workspace_bytes, ") must be >= 0"));

  if (c.alibi_slopes) FLASHLAB_RETURN_IF_ERROR(check_pointer_device(c.alibi_slopes, c.device, "alibi_slopes"));
  if (c.sink_logits) {
    FLASHLAB_RETURN_IF_ERROR(check_pointer_device(c.sink_logits, c.device, "sink_logits"));
    // Host values are readable here: NaN and +inf would poison every row (−inf turns a head's sink off).
    if (c.device == Device::kCPU)
      for (int64_t h = 0; h < c.heads_q; ++h)
        if (std::isnan(c.sink_logits[h]) || c.sink_logits[h] == std::numeric_limits<float>::infinity())
          return invalid(cat("sink_logits[", h, "] (", c.sink_logits[h], ") must be finite or -inf"));
  }
  if (varlen) {
    FLASHLAB_RETURN_IF_ERROR(check_pointer_device(c.cu_seqlens_q, c.device, "cu_seqlens_q"));
    FLASHLAB_RETURN_IF_ERROR(check_pointer_device(c.cu_seqlens_k, c.device, "cu_seqlens_k"));
    if (c.total_q < -1) return invalid(cat("total_q (", c.total_q, ") must be >= 0, or -1 (not given)"));
    if (c.total_k < -1) return invalid(cat("total_k (", c.total_k, ") must be >= 0, or -1 (not given)"));
  }
  // On the CPU the offsets are readable here: check them. (CUDA kernels trust them; reading
  // them would need a host synchronization.)
  if (varlen && c.device == Device::kCPU) {
    const char* names[2] = {"cu_seqlens_q", "cu_seqlens_k"};
    const int32_t* cus[2] = {c.cu_seqlens_q, c.cu_seqlens_k};
    const int64_t maxlen[2] = {c.seqlen_q, c.seqlen_k};
    for (int w = 0; w < 2; ++w) {
      if (cus[w][0] < 0) return invalid(cat(names[w], "[0] (", cus[w][0], ") must be >= 0"));
      for (int64_t b = 0; b < c.batch; ++b) {
        const int64_t len = static_cast<int64_t>(cus[w][b + 1]) - cus[w][b];
        if (len < 0)
          return invalid(cat(names[w], " must be non-decreasing: [", b + 1, "] (", cus[w][b + 1],
                             ") < [", b, "] (", cus[w][b], ")"));
        if (len > maxlen[w])
          return invalid(cat("sequence ", b, " has length ", len, " (from ", names[w], ") > ",
                             w == 0 ? "seqlen_q (" : "seqlen_k (", maxlen[w], ")"));
      }
      const int64_t total = w == 0 ? c.total_q : c.total_k;
      if (total >= 0 && cus[w][c.batch] > total)
        return invalid(cat(names[w], "[", c.batch, "] (", cus[w][c.batch], ") > ", w == 0 ? "total_q (" : "total_k (",
                           total, "): the packed tensors have fewer rows"));
    }
  }
  return Status::Ok();
}

namespace {

// Rows each tensor spans: per sequence, or the packed total for variable-length batches.
struct Extents {
  int64_t batch, rows_q, rows_k;
};
Extents extents(const AttentionConfig& c) {
  if (!is_varlen(c)) return {c.batch, c.seqlen_q, c.seqlen_k};
  if (c.device == Device::kCPU) return {1, c.cu_seqlens_q[c.batch], c.cu_seqlens_k[c.batch]};
  // On the device the totals are unknown without a sync, unless the caller gave them (total_q /
  // total_k). Any valid cu_seqlens has a total of at least the longest sequence, so checking over
  // seqlen_q / seqlen_k rows never rejects a valid packed layout such as LSE (heads_q, total_q);
  // kernels index with int64 regardless.
  return {1, c.total_q >= 0 ? c.total_q : c.seqlen_q, c.total_k >= 0 ? c.total_k : c.seqlen_k};
}

Status check_q_like(const char* name, const TensorRef& t, const AttentionConfig& c, const Extents& e,
                    bool query_side) {
  const int64_t rows = query_side ? e.rows_q : e.rows_k;
  const int64_t heads = query_side ? c.heads_q : c.heads_kv;
  FLASHLAB_RETURN_IF_ERROR(check_tensor(name, t.ptr, t.batch_stride, t.row_stride, t.head_stride,
                                        t.dim_stride, e.batch, rows, heads, c.head_dim,
                                        dtype_size(c.dtype), false));
  return check_pointer_device(t.ptr, c.device, name);
}
Status check_out_like(const char* name, const MutTensorRef& t, const AttentionConfig& c,
                      const Extents& e, bool query_side) {
  const int64_t rows = query_side ? e.rows_q : e.rows_k;
  const int64_t heads = query_side ? c.heads_q : c.heads_kv;
  FLASHLAB_RETURN_IF_ERROR(check_tensor(name, t.ptr, t.batch_stride, t.row_stride, t.head_stride,
                                        t.dim_stride, e.batch, rows, heads, c.head_dim,
                                        dtype_size(c.dtype), true));
  return check_pointer_device(t.ptr, c.device, name);
}
// LSE is (batch, heads_q, rows) with rows contiguous; varlen: (heads_q, total_q).
Status check_lse(const void* lse, int64_t batch_stride, int64_t head_stride, const AttentionConfig& c,
                 const Extents& e, bool is_output) {
  const int64_t batch = is_varlen(c) ? 1 : c.batch;
  FLASHLAB_RETURN_IF_ERROR(check_tensor("lse", lse, batch_stride, 1, head_stride, 1, batch, e.rows_q,
                                        c.heads_q, 1, 4, is_output));
  return check_pointer_device(lse, c.device, "lse");
}

}  // namespace

Status validate_forward_generic(const FwdParams& p) {
  FLASHLAB_RETURN_IF_ERROR(validate_config(p));
  const Extents e = extents(p);
  FLASHLAB_RETURN_IF_ERROR(check_q_like("q", p.q, p, e, true));
  FLASHLAB_RETURN_IF_ERROR(check_q_like("k", p.k, p, e, false));
  FLASHLAB_RETURN_IF_ERROR(check_q_like("v", p.v, p, e, false));
  FLASHLAB_RETURN_IF_ERROR(check_out_like("out", p.out, p, e, true));
  if (p.lse) FLASHLAB_RETURN_IF_ERROR(check_lse(p.lse, p.lse_batch_stride, p.lse_head_stride, p, e, true));
  return Status::Ok();
}

Status validate_backward_generic(const BwdParams& p) {
  FLASHLAB_RETURN_IF_ERROR(validate_config(p));
  const Extents e = extents(p);
  FLASHLAB_RETURN_IF_ERROR(check_q_like("q", p.q, p, e, true));
  FLASHLAB_RETURN_IF_ERROR(check_q_like("k", p.k, p, e, false));
  FLASHLAB_RETURN_IF_ERROR(check_q_like("v", p.v, p, e, false));
  FLASHLAB_RETURN_IF_ERROR(check_q_like("out", p.out, p, e, true));
  FLASHLAB_RETURN_IF_ERROR(check_q_like("dout", p.dout, p, e, true));
  if (p.lse == nullptr) return invalid("lse is null: the backward pass needs the forward's LSE");
  FLASHLAB_RETURN_IF_ERROR(check_lse(p.lse, p.lse_batch_stride, p.lse_head_stride, p, e, false));
  FLASHLAB_RETURN_IF_ERROR(check_out_like("dq", p.dq, p, e, true));
  FLASHLAB_RETURN_IF_ERROR(check_out_like("dk", p.dk, p, e, false));
  FLASHLAB_RETURN_IF_ERROR(check_out_like("dv", p.dv, p, e, false));
  if (p.dsink != nullptr) {
    if (p.sink_logits == nullptr) return invalid("dsink is set but sink_logits is null: there is no sink to differentiate");
    FLASHLAB_RETURN_IF_ERROR(check_pointer_device(p.dsink, p.device, "dsink"));
  }
  const void* outs[3] = {p.dq.ptr, p.dk.ptr, p.dv.ptr};
  const char* names[3] = {"dq", "dk", "dv"};
  for (int a = 0; a < 3; ++a)
    for (int b = a + 1; b < 3; ++b)
      if (outs[a] == outs[b]) return invalid(cat(names[a], " and ", names[b], " must not be the same buffer"));
  return Status::Ok();
}

namespace {
Status aligned(const char* name, const void* ptr, int64_t bs, int64_t rs, int64_t hs, int64_t elem,
               int64_t bytes, const char* impl) {
  if (reinterpret_cast<uintptr_t>(ptr) % bytes != 0)
    return Status::Unsupported(cat(name, " must be ", bytes, "-byte aligned for impl ", impl));
  const int64_t strides[3] = {bs, rs, hs};
  const char* sn[3] = {"batch", "row", "head"};
  for (int i = 0; i < 3; ++i)
    if ((strides[i] * elem) % bytes != 0)
      return Status::Unsupported(cat(name, " ", sn[i], " stride (", strides[i], " elements) must be a multiple of ",
                                     bytes / elem, " elements for impl ", impl));
  return Status::Ok();
}
}  // namespace

Status check_alignment_fwd(const FwdParams& p, int64_t bytes, const char* impl) {
  const int64_t es = dtype_size(p.dtype);
  FLASHLAB_RETURN_IF_ERROR(aligned("q", p.q.ptr, p.q.batch_stride, p.q.row_stride, p.q.head_stride, es, bytes, impl));
  FLASHLAB_RETURN_IF_ERROR(aligned("k", p.k.ptr, p.k.batch_stride, p.k.row_stride, p.k.head_stride, es, bytes, impl));
  FLASHLAB_RETURN_IF_ERROR(aligned("v", p.v.ptr, p.v.batch_stride, p.v.row_stride, p.v.head_stride, es, bytes, impl));
  return aligned("out", p.out.ptr, p.out.batch_stride, p.out.row_stride, p.out.head_stride, es, bytes, impl);
}

Status check_alignment_bwd(const BwdParams& p, int64_t bytes, const char* impl) {
  const int64_t es = dtype_size(p.dtype);
  const TensorRef ins[5] = {p.q, p.k, p.v, p.out, p.dout};
  const char* in_names[5] = {"q", "k", "v", "out", "dout"};
  for (int i = 0; i < 5; ++i)
    FLASHLAB_RETURN_IF_ERROR(aligned(in_names[i], ins[i].ptr, ins[i].batch_stride, ins[i].row_stride,
                                     ins[i].head_stride, es, bytes, impl));
  const MutTensorRef outs[3] = {p.dq, p.dk, p.dv};
  const char* out_names[3] = {"dq", "dk", "dv"};
  for (int i = 0; i < 3; ++i)
    FLASHLAB_RETURN_IF_ERROR(aligned(out_names[i], outs[i].ptr, outs[i].batch_stride, outs[i].row_stride,
                                     outs[i].head_stride, es, bytes, impl));
  return Status::Ok();
}

}  // namespace detail
}  // namespace flashlab
