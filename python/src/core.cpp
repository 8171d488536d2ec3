// python/src/core.cpp — flashlab._core: the thin layer between DLPack tensors and the C++ API.
//
//   _core.forward(q, k, v, out, lse=None, *, causal=..., impl=..., stream=..., ...)
//   _core.backward(dout, q, k, v, out, lse, dq, dk, dv, *, ..., deterministic=...)
//   _core.attention_flops(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, *, causal=...)
//
// Every tensor is any DLPack producer (torch, CuPy, JAX, NumPy, a DLPack capsule). Outputs are
// provided by the caller and written in place, so the framework's allocator owns all memory (what
// CUDA-graph capture needs). `stream` is a cudaStream_t as an integer (0: the legacy default
// stream); it is ignored on the CPU. A failed call raises flashlab.FlashlabError (a ValueError), or
// its subclass flashlab.UnsupportedError when the chosen implementation cannot run the call; the
// message is the C++ Status message and `.code` its StatusCode name. The GIL is released while
// the C++ library runs.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <vector>

#include "tensor_args.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace flashlab_py {
namespace {

struct ErrorTypes {
  PyObject* base = nullptr;         // flashlab.FlashlabError(ValueError)
  PyObject* unsupported = nullptr;  // flashlab.UnsupportedError(FlashlabError)
};
ErrorTypes g_errors;

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const StatusError& e) {
    const flashlab::Status& st = e.status();
    PyObject* cls = st.code() == flashlab::StatusCode::kUnsupported ? g_errors.unsupported : g_errors.base;
    nb::object exc = nb::steal(PyObject_CallFunction(cls, "s", st.message().c_str()));
    if (!exc.is_valid()) return;  // the constructor raised: that error stands
    exc.attr("code") = nb::str(flashlab::to_string(st.code()));
    PyErr_SetObject(cls, exc.ptr());
  }
}

void forward(const InArray& q, const InArray& k, const InArray& v, const OutArray& out,
             const std::optional<OutArray>& lse, std::optional<double> softmax_scale, bool causal,
             const std::string& causal_align, int64_t window_left, int64_t window_right, int64_t sink_tokens,
             double softcap, const std::optional<InArray>& alibi_slopes, const std::optional<InArray>& sink_logits,
             double dropout_p, uint64_t dropout_seed, uint64_t dropout_offset, const std::optional<InArray>& cu_seqlens_q,
             const std::optional<InArray>& cu_seqlens_k, std::optional<int64_t> max_seqlen_q,
             std::optional<int64_t> max_seqlen_k, const std::string& impl, int num_threads, uintptr_t stream,
             const nb::object& workspace) {
  flashlab::FwdParams p;
  const Layout L = read_layout(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, &p);
  set_options({softmax_scale, causal, causal_align, window_left, window_right, softcap, dropout_p, dropout_seed,
               dropout_offset, impl, num_threads, stream, sink_tokens},
              &p);
  if (alibi_slopes) set_alibi(*alibi_slopes, L, &p);
  if (sink_logits) p.sink_logits = sinks_ptr("sink_logits", *sink_logits, p, L);
  p.q = in_ref("q", q, "q", q, L);
  p.k = in_ref("k", k, "k", k, L);
  p.v = in_ref("v", v, "k", k, L);
  p.out = out_ref("out", out, "q", q, L);
  if (lse) set_lse(*lse, L, &p);
  nb::object keep;
  if (!workspace.is_none()) {
    int64_t bytes = 0;
    throw_if_error(flashlab::forward_workspace_size(p, &bytes));
    provide_workspace(workspace, bytes, L, &p, &keep);
  }
  flashlab::Status st;
  {
    nb::gil_scoped_release release;
    st = flashlab::attention_forward(p);
  }
  throw_if_error(st);
}

void backward(const InArray& dout, const InArray& q, const InArray& k, const InArray& v, const InArray& out,
              const InArray& lse, const OutArray& dq, const OutArray& dk, const OutArray& dv,
              std::optional<double> softmax_scale, bool causal, const std::string& causal_align, int64_t window_left,
              int64_t window_right, int64_t sink_tokens, double softcap, const std::optional<InArray>& alibi_slopes,
              const std::optional<InArray>& sink_logits, const std::optional<OutArray>& dsink, double dropout_p,
              uint64_t dropout_seed, uint64_t dropout_offset, const std::optional<InArray>& cu_seqlens_q,
              const std::optional<InArray>& cu_seqlens_k, std::optional<int64_t> max_seqlen_q,
              std::optional<int64_t> max_seqlen_k, const std::string& impl, int num_threads, uintptr_t stream,
              bool deterministic, const nb::object& workspace) {
  flashlab::BwdParams p;
  const Layout L = read_layout(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, &p);
  set_options({softmax_scale, causal, causal_align, window_left, window_right, softcap, dropout_p, dropout_seed,
               dropout_offset, impl, num_threads, stream, sink_tokens},
              &p);
  if (alibi_slopes) set_alibi(*alibi_slopes, L, &p);
  if (sink_logits) p.sink_logits = sinks_ptr("sink_logits", *sink_logits, p, L);
  if (dsink) p.dsink = const_cast<float*>(sinks_ptr("dsink", InArray(*dsink), p, L));
  p.deterministic = deterministic;
  p.q = in_ref("q", q, "q", q, L);
  p.k = in_ref("k", k, "k", k, L);
  p.v = in_ref("v", v, "k", k, L);
  p.out = in_ref("out", out, "q", q, L);
  p.dout = in_ref("dout", dout, "q", q, L);
  const LseRef r = lse_ref(lse, p, L);
  p.lse = static_cast<const float*>(r.ptr);
  p.lse_batch_stride = r.batch_stride;
  p.lse_head_stride = r.head_stride;
  p.dq = out_ref("dq", dq, "q", q, L);
  p.dk = out_ref("dk", dk, "k", k, L);
  p.dv = out_ref("dv", dv, "k", k, L);
  nb::object keep;
  if (!workspace.is_none()) {
    int64_t bytes = 0;
    throw_if_error(flashlab::backward_workspace_size(p, &bytes));
    provide_workspace(workspace, bytes, L, &p, &keep);
  }
  flashlab::Status st;
  {
    nb::gil_scoped_release release;
    st = flashlab::attention_backward(p);
  }
  throw_if_error(st);
}

// The mask-aware FLOP count every benchmark uses (flashlab::attention_flops). Variable-length
// batches pass host cu_seqlens (any sequence of ints, batch + 1 entries); the lengths then come
// from them and seqlen_q / seqlen_k are not read.
nb::tuple attention_flops(int64_t batch, int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q,
                          int64_t heads_kv, int64_t head_dim, bool causal, const std::string& causal_align,
                          int64_t window_left, int64_t window_right, int64_t sink_tokens,
                          const std::optional<std::vector<int64_t>>& cu_seqlens_q,
                          const std::optional<std::vector<int64_t>>& cu_seqlens_k) {
  if (batch < 0 || seqlen_q < 0 || seqlen_k < 0 || heads_q < 0 || heads_kv < 0 || head_dim < 0)
    fail("attention_flops: batch, seqlen_q, seqlen_k, heads_q, heads_kv and head_dim must be >= 0");
  if (window_left < -1 || window_right < -1)
    fail("attention_flops: window sides must be >= -1 (-1 = unbounded)");
  if (sink_tokens < 0) fail("attention_flops: sink_tokens must be >= 0 (0 = off)");
  flashlab::AttentionConfig c;
  c.batch = batch;
  c.seqlen_q = seqlen_q;
  c.seqlen_k = seqlen_k;
  c.heads_q = heads_q;
  c.heads_kv = heads_kv;
  c.head_dim = head_dim;
  Options o;
  o.causal = causal;
  o.causal_align = causal_align;
  o.window_left = window_left;
  o.window_right = window_right;
  o.sink_tokens = sink_tokens;
  set_options(o, &c);
  if (cu_seqlens_q.has_value() != cu_seqlens_k.has_value())
    fail("cu_seqlens_q and cu_seqlens_k must be given together (variable-length batch) or not at all");
  std::vector<int32_t> cu_q, cu_k;
  if (cu_seqlens_q) {
    const auto copy = [&](const char* name, const std::vector<int64_t>& in, std::vector<int32_t>* out) {
      if (static_cast<int64_t>(in.size()) != batch + 1)
        fail(std::string(name) + " has " + std::to_string(in.size()) +
             " entries; expected batch + 1 = " + std::to_string(batch + 1));
      for (size_t i = 0; i < in.size(); ++i) {
        if (in[i] < 0 || in[i] > INT32_MAX || (i > 0 && in[i] < in[i - 1]))
          fail(std::string(name) + " must be non-decreasing int32 offsets from >= 0; entry " +
               std::to_string(i) + " is " + std::to_string(in[i]));
        out->push_back(static_cast<int32_t>(in[i]));
      }
    };
    copy("cu_seqlens_q", *cu_seqlens_q, &cu_q);
    copy("cu_seqlens_k", *cu_seqlens_k, &cu_k);
  }
  const flashlab::AttentionFlops f = flashlab::attention_flops(c, cu_q.empty() ? nullptr : cu_q.data(),
                                                               cu_k.empty() ? nullptr : cu_k.data());
  return nb::make_tuple(f.forward, f.backward);
}

nb::list implementations() {
  nb::list out;
  for (const flashlab::ImplInfo& i : flashlab::list_implementations()) {
    nb::dict d;
    d["name"] = i.name;
    d["device"] = flashlab::to_string(i.device);
    d["available"] = i.available;
    d["description"] = i.description;
    out.append(d);
  }
  return out;
}

nb::dict build_info() {
  const flashlab::BuildInfo b = flashlab::build_info();
  nb::dict d;
  d["version"] = b.version;
  d["cuda_compiled"] = b.cuda_compiled;
  d["cuda_archs"] = b.cuda_archs;
  d["cuda_version"] = b.cuda_version;
  d["compiler"] = b.compiler;
  d["cpu_flags"] = b.cpu_flags;
  d["cuda_device_count"] = b.cuda_device_count;
  nb::list devices;
  for (const std::string& s : b.cuda_devices) devices.append(s);
  d["cuda_devices"] = devices;
  return d;
}

}  // namespace
}  // namespace flashlab_py

NB_MODULE(_core, m) {
  using namespace flashlab_py;
  m.doc() = "flashlab's C++ API over DLPack tensors (see docs/python.md)";

  g_errors.base = PyErr_NewExceptionWithDoc(
      "flashlab.FlashlabError", "A flashlab call was refused; the message names the argument and the rule.",
      PyExc_ValueError, nullptr);
  g_errors.unsupported = PyErr_NewExceptionWithDoc(
      "flashlab.UnsupportedError", "Well-formed, but the selected implementation cannot run this call.",
      g_errors.base, nullptr);
  m.attr("FlashlabError") = nb::handle(g_errors.base);
  m.attr("UnsupportedError") = nb::handle(g_errors.unsupported);
  nb::register_exception_translator(translate);

  m.attr("__version__") = FLASHLAB_VERSION_STRING;

  m.def("forward", &forward, "q"_a, "k"_a, "v"_a, "out"_a.noconvert(), "lse"_a.noconvert() = nb::none(),
        nb::kw_only(), "softmax_scale"_a = nb::none(), "causal"_a = false, "causal_align"_a = "bottom_right",
        "window_left"_a = -1, "window_right"_a = -1, "sink_tokens"_a = 0, "softcap"_a = 0.0,
        "alibi_slopes"_a = nb::none(), "sink_logits"_a = nb::none(), "dropout_p"_a = 0.0, "dropout_seed"_a = 0, "dropout_offset"_a = 0, "cu_seqlens_q"_a = nb::none(),
        "cu_seqlens_k"_a = nb::none(), "max_seqlen_q"_a = nb::none(), "max_seqlen_k"_a = nb::none(),
        "impl"_a = "auto", "num_threads"_a = 0, "stream"_a = 0, "workspace"_a = nb::none(),
        "Attention forward: writes out (like q) and, when given, lse (batch, heads_q, seqlen_q) fp32. "
        "sink_logits: (heads_q,) fp32 attention sinks. sink_tokens: StreamingLLM sink tokens, the first keys "
        "visible left of the window (CPU backends).");

  m.def("backward", &backward, "dout"_a, "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a, "dq"_a.noconvert(),
        "dk"_a.noconvert(), "dv"_a.noconvert(), nb::kw_only(), "softmax_scale"_a = nb::none(), "causal"_a = false,
        "causal_align"_a = "bottom_right", "window_left"_a = -1, "window_right"_a = -1, "sink_tokens"_a = 0,
        "softcap"_a = 0.0, "alibi_slopes"_a = nb::none(), "sink_logits"_a = nb::none(),
        "dsink"_a.noconvert() = nb::none(),
        "dropout_p"_a = 0.0, "dropout_seed"_a = 0, "dropout_offset"_a = 0, "cu_seqlens_q"_a = nb::none(), "cu_seqlens_k"_a = nb::none(), "max_seqlen_q"_a = nb::none(),
        "max_seqlen_k"_a = nb::none(), "impl"_a = "auto", "num_threads"_a = 0, "stream"_a = 0,
        "deterministic"_a = false, "workspace"_a = nb::none(),
        "Attention backward: writes dq (like q), dk and dv (like k) from the forward's out and lse; with "
        "sink_logits, also dsink (heads_q,) fp32 when given.");

  m.def("attention_flops", &attention_flops, "batch"_a, "seqlen_q"_a, "seqlen_k"_a, "heads_q"_a, "heads_kv"_a,
        "head_dim"_a, nb::kw_only(), "causal"_a = false, "causal_align"_a = "bottom_right",
        "window_left"_a = -1, "window_right"_a = -1, "sink_tokens"_a = 0, "cu_seqlens_q"_a = nb::none(),
        "cu_seqlens_k"_a = nb::none(),
        "(forward, backward) FLOPs, mask-aware (sink tokens' pairs counted): 4 * head_dim per visible (query, key) pair and query head "
        "forward, 2.5x that backward (flashlab::attention_flops; every benchmark's TFLOP/s uses it).");
  bind_kvcache(m);
  m.def("implementations", &implementations, "Every implementation in this build: name, device, availability.");
  m.def("build_info", &build_info, "How libflashlab.so was built and which CUDA devices it sees.");
}
