// python/src/torch_ext.cpp — flashlab._torch_ext: the eager backward as a C++ autograd node.
//
//   out, lse = flashlab.torch._fwd(*args)          # the forward, through flashlab._core
//   _torch_ext.attach(out, lse, *args)             # out.grad_fn = FlashlabAttentionBackward
//
// `args` are flashlab::fwd's 20 arguments (q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
// max_seqlen_k, alibi_slopes, sink_logits, rng_state, softmax_scale, causal, causal_align,
// window_left, window_right, softcap, dropout_p, deterministic, impl, and sink_tokens when given: it
// has a default), already checked by the
// forward. attach() saves what the backward needs and makes `out` the output of a C++ node whose
// next edges are q, k, v and sink_logits: what torch.autograd.Function.apply does for a Python
// Function, without the Python. The node's apply() runs on the autograd engine's thread without the
// GIL: it allocates dq, dk, dv (and dsink when sink_logits needs its gradient) with ATen and calls
// flashlab::attention_backward on the current stream.
//
// Why (docs/perf.md, "Host path: the backward as a C++ autograd node"): a Python Function's
// backward costs the engine a PyNode (GIL, tuples, the Function's Python), and the Python backward
// then crossed into flashlab._core with ten DLPack capsules, a Python workspace callback and five
// Python allocations. A short backward after an L2 flush waits for all of that.
//
// The node takes the dispatcher path (the flashlab::bwd op, boxed) whenever something must see the
// op or a derivative of the backward is requested: grad mode on during the backward
// (create_graph=True; the op's autograd kernel refuses the double backward), a torch dispatch or
// function mode, or a dout that is a tensor subclass. flashlab.torch falls back to its Python
// Function when this module is missing or was built against another torch.
#include <Python.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/autograd/saved_variable.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "options.h"

namespace flashlab_py {
namespace {

using torch::autograd::Node;
using torch::autograd::SavedVariable;
using torch::autograd::variable_list;

PyObject* g_error = nullptr;        // flashlab.FlashlabError
PyObject* g_unsupported = nullptr;  // flashlab.UnsupportedError

// Sets the Python error for a failed Status: flashlab.UnsupportedError / FlashlabError with `.code`,
// as flashlab._core's translator does. Needs the GIL.
void set_python_error(const flashlab::Status& st) {
  PyObject* cls = st.code() == flashlab::StatusCode::kUnsupported ? g_unsupported : g_error;
  PyObject* exc = PyObject_CallFunction(cls, "s", st.message().c_str());
  if (exc == nullptr) return;  // the constructor raised: that error stands
  PyObject* code = PyUnicode_FromString(flashlab::to_string(st.code()));
  if (code != nullptr) {
    PyObject_SetAttrString(exc, "code", code);
    Py_DECREF(code);
  }
  PyErr_SetObject(cls, exc);
  Py_DECREF(exc);
}

flashlab::DType dtype_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return flashlab::DType::kFloat32;
    case at::kHalf: return flashlab::DType::kFloat16;
    case at::kBFloat16: return flashlab::DType::kBFloat16;
    default: fail(std::string("flashlab: unsupported dtype ") + c10::toString(t.scalar_type()));
  }
}

// flash-attn's maybe_contiguous, as flashlab.torch._last_dim_contiguous.
at::Tensor last_dim_contiguous(const at::Tensor& t) {
  return t.stride(-1) == 1 || t.size(-1) == 1 ? t : t.contiguous();
}

// (batch, seqlen, heads, head_dim), or (tokens, heads, head_dim) for a variable-length batch.
template <typename Ref, typename Ptr>
Ref ref_of(const at::Tensor& t, Ptr ptr, bool varlen) {
  const int64_t nd = t.dim();
  Ref r;
  r.ptr = ptr;
  r.batch_stride = varlen ? 0 : t.stride(0);
  r.row_stride = t.stride(nd - 3);
  r.head_stride = t.stride(nd - 2);
  r.dim_stride = t.size(nd - 1) == 1 ? 1 : t.stride(nd - 1);
  return r;
}
flashlab::TensorRef in_ref(const at::Tensor& t, bool varlen) {
  return ref_of<flashlab::TensorRef>(t, t.const_data_ptr(), varlen);
}
flashlab::MutTensorRef out_ref(const at::Tensor& t, bool varlen) {
  return ref_of<flashlab::MutTensorRef>(t, t.mutable_data_ptr(), varlen);
}

// Python int / float / bool / str / None from a fast-call argument (types checked by the caller:
// flashlab.torch builds these from its own checked arguments).
int64_t as_int(PyObject* o) { return PyLong_AsLongLong(o); }
std::optional<double> as_opt_double(PyObject* o) {
  if (o == Py_None) return std::nullopt;
  return PyFloat_AsDouble(o);
}
std::string as_str(PyObject* o) {
  Py_ssize_t n = 0;
  const char* s = PyUnicode_AsUTF8AndSize(o, &n);
  return s ? std::string(s, static_cast<size_t>(n)) : std::string();
}
at::Tensor as_tensor(PyObject* o) {  // None -> an undefined tensor
  return o == Py_None ? at::Tensor() : THPVariable_Unpack(o);
}

struct FlashlabAttentionBackward : public Node {
  // Saved inputs (q, k, v, alibi, sinks, cu_seqlens, rng_state) and outputs (out, lse).
  SavedVariable q_, k_, v_, out_, lse_, cu_q_, cu_k_, alibi_, sinks_, rng_state_;
  int64_t max_q_ = 0, max_k_ = 0;
  Options options_;  // the forward's scalar options; the dropout seed and the stream are set per call
  bool deterministic_ = false;

  std::string name() const override { return "FlashlabAttentionBackward"; }

  void release_variables() override {
    for (SavedVariable* s : {&q_, &k_, &v_, &out_, &lse_, &cu_q_, &cu_k_, &alibi_, &sinks_, &rng_state_})
      s->reset_data();
  }

  variable_list apply(variable_list&& grads) override {
    const at::Tensor& dout = grads[0];
    if (!dout.defined()) return variable_list(4);  // only LSE was used downstream: nothing flows back
    auto self = shared_from_this();
    at::Tensor q = q_.unpack(self), k = k_.unpack(self), v = v_.unpack(self), out = out_.unpack(self),
               lse = lse_.unpack(self), cu_q = cu_q_.unpack(self), cu_k = cu_k_.unpack(self),
               alibi = alibi_.unpack(self), sinks = sinks_.unpack(self), rng_state = rng_state_.unpack(self);
    const bool sink_grad = sinks.defined() && task_should_compute_output(3);
    if (needs_dispatcher(dout)) return through_op(dout, q, k, v, out, lse, cu_q, cu_k, alibi, sinks, rng_state,
                                                  sink_grad);
    return direct(dout, q, k, v, out, lse, cu_q, cu_k, alibi, sinks, rng_state, sink_grad);
  }

 private:
  // Whether this backward must go through the flashlab::bwd op (see the file's header).
  static bool needs_dispatcher(const at::Tensor& dout) {
    return at::GradMode::is_enabled() || c10::impl::TorchDispatchModeTLS::stack_len() > 0 ||
           at::impl::torch_function_mode_enabled() || dout.unsafeGetTensorImpl()->is_python_dispatch();
  }

  variable_list through_op(const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const at::Tensor& out, const at::Tensor& lse, const at::Tensor& cu_q,
                           const at::Tensor& cu_k, const at::Tensor& alibi, const at::Tensor& sinks,
                           const at::Tensor& rng_state, bool sink_grad) {
    static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("flashlab::bwd", "");
    const auto opt = [](const at::Tensor& t) { return t.defined() ? c10::IValue(t) : c10::IValue(); };
    const Options& o = options_;
    torch::jit::Stack stack{dout, q, k, v, out, lse, opt(cu_q), opt(cu_k), c10::SymInt(max_q_),
                            c10::SymInt(max_k_), opt(alibi), opt(sinks), opt(rng_state),
                            o.softmax_scale ? c10::IValue(*o.softmax_scale) : c10::IValue(), o.causal,
                            o.causal_align, c10::SymInt(o.window_left), c10::SymInt(o.window_right), o.softcap,
                            o.dropout_p, deterministic_, o.impl, sink_grad, c10::SymInt(o.sink_tokens)};
    op.callBoxed(&stack);
    variable_list grads{stack[0].toTensor(), stack[1].toTensor(), stack[2].toTensor(), at::Tensor()};
    if (sink_grad) grads[3] = stack[3].toTensor();
    return grads;
  }

  variable_list direct(const at::Tensor& dout_in, const at::Tensor& q_in, const at::Tensor& k_in,
                       const at::Tensor& v_in, const at::Tensor& out_in, const at::Tensor& lse,
                       const at::Tensor& cu_q, const at::Tensor& cu_k, const at::Tensor& alibi,
                       const at::Tensor& sinks_in, const at::Tensor& rng_state, bool sink_grad) {
    const at::Tensor dout = last_dim_contiguous(dout_in), q = last_dim_contiguous(q_in),
                     k = last_dim_contiguous(k_in), v = last_dim_contiguous(v_in),
                     out = last_dim_contiguous(out_in);
    const bool varlen = cu_q.defined();
    const bool cuda = q.is_cuda();
    c10::OptionalDeviceGuard guard;
    if (cuda) guard.reset_device(q.device());
    at::Tensor dq = at::empty_like(q, at::MemoryFormat::Contiguous);
    at::Tensor dk = at::empty_like(k, at::MemoryFormat::Contiguous);
    at::Tensor dv = at::empty_like(v, at::MemoryFormat::Contiguous);
    at::Tensor dsink;
    if (sink_grad) dsink = at::empty({q.size(-2)}, q.options().dtype(at::kFloat));

    flashlab::BwdParams p;
    p.dtype = dtype_of(q);
    p.device = cuda ? flashlab::Device::kCUDA : flashlab::Device::kCPU;
    const int64_t nd = q.dim();
    p.heads_q = q.size(nd - 2);
    p.heads_kv = k.size(nd - 2);
    p.head_dim = q.size(nd - 1);
    if (varlen) {
      p.batch = cu_q.size(0) - 1;
      p.seqlen_q = max_q_;
      p.seqlen_k = max_k_;
      p.cu_seqlens_q = cu_q.const_data_ptr<int32_t>();
      p.cu_seqlens_k = cu_k.const_data_ptr<int32_t>();
      p.total_q = q.size(0);  // packed rows
      p.total_k = k.size(0);
    } else {
      p.batch = q.size(0);
      p.seqlen_q = q.size(1);
      p.seqlen_k = k.size(1);
    }
    Options o = options_;
    if (o.dropout_p > 0.0 && rng_state.defined()) {  // [seed, offset], int64 on the CPU (flashlab.torch._rng)
      const int64_t* s = rng_state.const_data_ptr<int64_t>();
      o.dropout_seed = static_cast<uint64_t>(s[0]);
      o.dropout_offset = static_cast<uint64_t>(s[1]);
    }
    if (cuda) o.stream = reinterpret_cast<uintptr_t>(c10::cuda::getCurrentCUDAStream(q.get_device()).stream());
    set_options(o, &p);
    if (alibi.defined()) {
      p.alibi_slopes = alibi.const_data_ptr<float>();
      p.alibi_batch_stride = alibi.dim() == 2 ? alibi.stride(0) : 0;
    }
    const at::Tensor sinks = sinks_in.defined() ? sinks_in.contiguous() : sinks_in;
    if (sinks.defined()) p.sink_logits = sinks.const_data_ptr<float>();
    if (dsink.defined()) p.dsink = dsink.mutable_data_ptr<float>();
    p.deterministic = deterministic_;
    p.q = in_ref(q, varlen);
    p.k = in_ref(k, varlen);
    p.v = in_ref(v, varlen);
    p.out = in_ref(out, varlen);
    p.dout = in_ref(dout, varlen);
    p.lse = lse.const_data_ptr<float>();
    p.lse_batch_stride = varlen ? 0 : lse.stride(0);
    p.lse_head_stride = varlen ? lse.stride(0) : lse.stride(1);
    p.dq = out_ref(dq, varlen);
    p.dk = out_ref(dk, varlen);
    p.dv = out_ref(dv, varlen);
    at::Tensor workspace;
    flashlab::Status st;
    if (cuda) {
      int64_t bytes = 0;
      st = flashlab::backward_workspace_size(p, &bytes);
      if (st.ok() && bytes > 0) {
        workspace = at::empty({bytes}, q.options().dtype(at::kByte));
        p.workspace = workspace.mutable_data_ptr();
        p.workspace_bytes = bytes;
      }
    }
    if (st.ok()) st = flashlab::attention_backward(p);
    if (!st.ok()) {  // a flashlab.FlashlabError / UnsupportedError for the caller of backward()
      pybind11::gil_scoped_acquire gil;
      set_python_error(st);
      python_error e;
      e.persist();
      throw std::move(e);
    }
    return {dq, dk, dv, dsink};
  }
};

// attach(out, lse, q, k, v, cu_q, cu_k, max_q, max_k, alibi, sinks, rng_state, softmax_scale, causal,
//        causal_align, window_left, window_right, softcap, dropout_p, deterministic, impl
//        [, sink_tokens]) -> None    (sink_tokens: the op's last argument, which has a default)
PyObject* attach(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (nargs != 21 && nargs != 22) {
    PyErr_Format(PyExc_TypeError, "attach() takes 21 or 22 arguments (%zd given)", nargs);
    return nullptr;
  }
  const at::Tensor out = THPVariable_Unpack(args[0]), lse = THPVariable_Unpack(args[1]);
  const at::Tensor q = as_tensor(args[2]), k = as_tensor(args[3]), v = as_tensor(args[4]);
  const at::Tensor sinks = as_tensor(args[10]);
  for (const at::Tensor* t : {&q, &k, &v, &sinks})
    TORCH_CHECK(!torch::autograd::isFwGradDefined(*t),
                "flashlab attention has no forward-mode derivative (a tangent was given with an input)");
  auto node = std::shared_ptr<FlashlabAttentionBackward>(new FlashlabAttentionBackward(),
                                                         torch::autograd::deleteNode);
  node->max_q_ = as_int(args[7]);
  node->max_k_ = as_int(args[8]);
  Options& o = node->options_;
  o.softmax_scale = as_opt_double(args[12]);
  o.causal = PyObject_IsTrue(args[13]) == 1;
  o.causal_align = as_str(args[14]);
  o.window_left = as_int(args[15]);
  o.window_right = as_int(args[16]);
  o.softcap = PyFloat_AsDouble(args[17]);
  o.dropout_p = PyFloat_AsDouble(args[18]);
  node->deterministic_ = PyObject_IsTrue(args[19]) == 1;
  o.impl = as_str(args[20]);
  o.sink_tokens = nargs == 22 ? as_int(args[21]) : 0;
  if (PyErr_Occurred()) return nullptr;  // a scalar of the wrong type: `out` is left untouched
  node->set_next_edges(torch::autograd::collect_next_edges(q, k, v, sinks));
  torch::autograd::set_history(out, node);  // lse gets no history: it is not differentiable
  node->q_ = SavedVariable(q, false);
  node->k_ = SavedVariable(k, false);
  node->v_ = SavedVariable(v, false);
  node->out_ = SavedVariable(out, true);
  node->lse_ = SavedVariable(lse, false);
  node->cu_q_ = SavedVariable(as_tensor(args[5]), false);
  node->cu_k_ = SavedVariable(as_tensor(args[6]), false);
  node->alibi_ = SavedVariable(as_tensor(args[9]), false);
  node->sinks_ = SavedVariable(sinks, false);
  node->rng_state_ = SavedVariable(as_tensor(args[11]), false);
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

// set_errors(FlashlabError, UnsupportedError): the classes a failed backward raises.
PyObject* set_errors(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "set_errors() takes 2 arguments");
    return nullptr;
  }
  Py_XDECREF(g_error);
  Py_XDECREF(g_unsupported);
  g_error = args[0];
  g_unsupported = args[1];
  Py_INCREF(g_error);
  Py_INCREF(g_unsupported);
  Py_RETURN_NONE;
}

PyMethodDef g_methods[] = {
    {"attach", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(attach)), METH_FASTCALL,
     "attach(out, lse, *fwd_args): make `out` the output of a C++ autograd node whose backward is "
     "flashlab's (the arguments are flashlab::fwd's 19 or 20, after out and lse)."},
    {"set_errors", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(set_errors)), METH_FASTCALL,
     "set_errors(FlashlabError, UnsupportedError): what a failed backward raises."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef g_module = {PyModuleDef_HEAD_INIT, "_torch_ext",
                        "flashlab's eager backward as a C++ autograd node (see flashlab.torch)", -1, g_methods,
                        nullptr, nullptr, nullptr, nullptr};

}  // namespace
}  // namespace flashlab_py

PyMODINIT_FUNC PyInit__torch_ext() { return PyModule_Create(&flashlab_py::g_module); }
