"""flashlab.torch — flashlab attention as PyTorch custom ops.

    import torch, flashlab.torch as fl
    q, k, v = (torch.randn(2, 1024, 8, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    out = fl.attention(q, k, v, causal=True)     # (batch, seqlen, heads, head_dim), like q
    out.sum().backward()

Two ops, ``flashlab::fwd`` and ``flashlab::bwd``, defined with ``torch.library.Library`` (what
``torch.library.custom_op`` would register, with an autograd kernel of our own: see "The ops"):

* each allocates its outputs with ``torch.empty`` inside the op (torch's caching allocator owns all
  memory, so CUDA-graph capture records the allocations in the graph's pool);
* each launches on ``torch.cuda.current_stream()`` and never synchronizes the host;
* ``register_fake`` gives their output shapes, so ``torch.compile(fullgraph=True)`` traces them
  as opaque nodes without graph breaks;
* the autograd kernel (a ``torch.autograd.Function`` at the Autograd key) makes ``flashlab::bwd``
  the derivative of ``flashlab::fwd``.

Eager calls skip the dispatcher (``_eager``), and where ``flashlab._torch_ext`` is built their
backward is a C++ autograd node (python/src/torch_ext.cpp: no Python in the backward; the op
path where something must see it): see ``_forward``.

Tensors cross into C++ as DLPack capsules made with ``torch.utils.dlpack.to_dlpack``: it performs
no cross-stream synchronization (``__dlpack__()`` with its default ``stream=None`` in older torch
versions would record an event on the current stream — fatal inside graph capture) and none of
``__dlpack__``'s per-tensor Python checks (``requires_grad``, the current device), which cost more
host time than the rest of the call.

On CUDA ``impl="auto"`` runs ``cuda_sm90`` on an H100/H200 (the forward, varlen included, and the
backward at every head dim, deterministic or varlen or neither) and ``cuda_sm80`` for the rest
(dropout, sink tokens beside a left window in the forward above head dim 192, other GPUs): bf16/fp16, head_dim any multiple of 8 up to 256, and every feature
(causal in both alignments, sliding window, StreamingLLM sink tokens, softcap, ALiBi, dropout,
GQA/MQA, varlen); what it refuses (e.g. fp32, head_dim 100) raises ``flashlab.UnsupportedError``
with the C++ library's message. On the CPU every feature runs in fp32,
fp16 and bf16 (``cpu_flash``), sink tokens included.

Attention sinks (``sink_logits``, fp32 (heads_q,), learnable) are one more optional input of both
ops; ``flashlab::bwd`` also returns their gradient (dsink), computed only when the autograd kernel
asks for it (sink_logits requires grad): see "The ops".

Inference against a K/V cache (docs/kvcache.md), in _torch_kvcache.py with the same conventions:
``attention_with_kvcache`` / ``attention_combine`` through the ops ``flashlab::kvcache_attention``
(k_cache / v_cache declared mutated: the in-place append) and ``flashlab::kvcache_combine``, and
``KVCacheDecoder``: ``plan()`` sizes and allocates the workspace and outputs on the host, ``run()``
calls ``flashlab::kvcache_attention_out`` into them, allocating nothing and never synchronizing, so
that a CUDA graph can capture it (verified on an H100: the replay equals eager bit for bit). CPU
tensors run; on CUDA the C++ library decides (what it refuses raises ``UnsupportedError``).
docs/python.md has the rest.
"""

from os import environ as _environ
from typing import List, Optional, Tuple

try:
    import torch  # noqa: F401
except ModuleNotFoundError as _e:
    if _e.name != "torch":
        raise
    raise ImportError(
        "flashlab.torch needs PyTorch, which is not installed: pip install 'flashlab[torch]' "
        "(or install torch >= 2.4 itself, e.g. from https://pytorch.org for your CUDA version)",
        name="torch",
    ) from _e
from torch import Tensor  # noqa: E402
from torch.utils.dlpack import to_dlpack  # noqa: E402

from . import _core  # noqa: E402
from ._core import FlashlabError, UnsupportedError  # noqa: E402

__all__ = ["attention", "FlashlabError", "UnsupportedError"]


# ---------------------------------------------------------------------------------------------
# Crossing into flashlab._core
# ---------------------------------------------------------------------------------------------
def _capsule(t: Optional[Tensor]):
    """A DLPack capsule of `t` without stream synchronization (see the module docstring)."""
    return None if t is None else to_dlpack(t)


def _last_dim_contiguous(t: Tensor) -> Tensor:
    # flash-attn's maybe_contiguous: the kernels need stride(-1) == 1; other strides pass through.
    return t if t.stride(-1) == 1 or t.shape[-1] == 1 else t.contiguous()


def _allocate_workspace(nbytes: int):
    """Device scratch on the current device (the call runs under torch.cuda.device(q.device))."""
    return to_dlpack(torch.empty(nbytes, dtype=torch.uint8, device="cuda"))


# torch._C._any_requires_grad (what custom_op's autograd kernel asks) where this torch has it.
_any_requires_grad = getattr(torch._C, "_any_requires_grad", None) or (
    lambda *args: any(isinstance(a, Tensor) and a.requires_grad for a in args))


# The current stream's cudaStream_t as an int: the raw query TorchInductor's generated code uses,
# without building a torch.cuda.Stream object per call; the public spelling where it is missing.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _current_stream(device: torch.device) -> int:
    if _raw_stream is not None:
        return _raw_stream(device.index)
    return torch.cuda.current_stream(device).cuda_stream


def _call(fn, q: Tensor, *tensors, **options):
    """fn(*capsules, **options) with q's stream and workspace; on CUDA on q's device (the library
    launches on the current device: switched to it only when it is not already current)."""
    if not q.is_cuda:
        fn(*map(_capsule, tensors), stream=0, **options)
        return
    if q.device.index == torch.cuda.current_device():
        fn(*map(_capsule, tensors), stream=_current_stream(q.device), workspace=_allocate_workspace, **options)
        return
    with torch.cuda.device(q.device):
        fn(*map(_capsule, tensors), stream=_current_stream(q.device), workspace=_allocate_workspace, **options)


def _rng(rng_state: Optional[Tensor], dropout_p: float) -> Tuple[int, int]:
    """(seed, offset) from the CPU int64 tensor [seed, offset]; reading it never touches a GPU."""
    if dropout_p <= 0.0 or rng_state is None:
        return 0, 0
    seed, offset = rng_state.tolist()
    return seed & 0xFFFFFFFFFFFFFFFF, offset & 0xFFFFFFFFFFFFFFFF


def _lse_shape(q: Tensor, varlen: bool) -> List[int]:
    if varlen:  # packed (total_q, heads, head_dim) -> (heads, total_q)
        return [q.shape[1], q.shape[0]]
    return [q.shape[0], q.shape[2], q.shape[1]]


def _options(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, alibi_slopes, sink_logits,
             rng_state, softmax_scale, causal, causal_align, window_left, window_right, softcap,
             dropout_p, impl, sink_tokens) -> dict:  # fmt: skip
    seed, offset = _rng(rng_state, dropout_p)
    varlen = cu_seqlens_q is not None
    if sink_logits is not None:  # the C++ layer needs stride 1 (a 1-D view with a step is copied)
        sink_logits = _last_dim_contiguous(sink_logits)
    return dict(
        softmax_scale=softmax_scale, causal=causal, causal_align=causal_align,
        window_left=window_left, window_right=window_right, softcap=softcap,
        alibi_slopes=_capsule(alibi_slopes), sink_logits=_capsule(sink_logits), dropout_p=dropout_p,
        dropout_seed=seed, dropout_offset=offset, cu_seqlens_q=_capsule(cu_seqlens_q),
        cu_seqlens_k=_capsule(cu_seqlens_k), max_seqlen_q=max_seqlen_q if varlen else None,
        max_seqlen_k=max_seqlen_k if varlen else None, impl=impl, sink_tokens=sink_tokens,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# The ops
# ---------------------------------------------------------------------------------------------
# Defined with torch.library.Library rather than torch.library.custom_op: the schema, the kernels,
# the fake kernels and the autograd formula are what custom_op + register_fake + register_autograd
# would register, but the autograd kernel is ours. custom_op's (torch 2.15) rebuilds every call's
# default arguments from op._schema.arguments, a list re-created on each access: about 50 us a call
# for the 18 arguments the forward had then, more than everything else in the call together.
_lib = torch.library.Library("flashlab", "DEF")
_OPTIONS = (
    "Tensor? cu_seqlens_q, Tensor? cu_seqlens_k, SymInt max_seqlen_q, SymInt max_seqlen_k, "
    "Tensor? alibi_slopes, Tensor? sink_logits, Tensor? rng_state, float? softmax_scale, bool causal, "
    "str causal_align, SymInt window_left, SymInt window_right, float softcap, float dropout_p, "
    "bool deterministic, str impl"
)
# StreamingLLM sink tokens came after the others: the last argument of each op, with a default, so
# that calls written without it (flashlab.distributed, callers of the ops) keep their meaning. A
# Python kernel receives only the arguments given (defaults are not filled in): hence the kernels'
# own defaults below.
_SINK_TOKENS = "SymInt sink_tokens=0"
_lib.define("fwd(Tensor q, Tensor k, Tensor v, " + _OPTIONS + ", " + _SINK_TOKENS + ") -> (Tensor, Tensor)",
            tags=(torch.Tag.pt2_compliant_tag,))  # fmt: skip
# The backward has one argument of its own, after the shared options: `sink_grad`, whether to
# compute dL/dsink_logits (the autograd kernel passes "sink_logits requires grad"). Its 4th result
# is that gradient, fp32 (heads_q,), when sink_grad and sink_logits is given, else an empty (0,)
# tensor: an op cannot return None, and a fixed arity keeps one schema for every call. Frozen sinks
# (given, not learned) thus cost no allocation and let the library skip the reduction (a null
# BwdParams::dsink); dq, dk, dv still need sink_logits: the forward's LSE includes the sinks.
_lib.define("bwd(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, " + _OPTIONS
            + ", bool sink_grad, " + _SINK_TOKENS + ") -> (Tensor, Tensor, Tensor, Tensor)",
            tags=(torch.Tag.pt2_compliant_tag,))  # fmt: skip
# sink_grad's place among the backward's arguments after sink_logits (rng_state ... impl, sink_grad).
_SINK_GRAD_AFTER_SINKS = 10
# sink_logits' place among _FwdFunction.forward's inputs after ctx (keyset, q, k, v, cu_seqlens_q,
# cu_seqlens_k, max_seqlen_q, max_seqlen_k, alibi_slopes, sink_logits, ...): ctx.needs_input_grad's index.
_SINK_INPUT = 9


def _fwd(
    q: Tensor, k: Tensor, v: Tensor,
    cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor],
    max_seqlen_q: int, max_seqlen_k: int,
    alibi_slopes: Optional[Tensor], sink_logits: Optional[Tensor], rng_state: Optional[Tensor],
    softmax_scale: Optional[float], causal: bool, causal_align: str,
    window_left: int, window_right: int, softcap: float, dropout_p: float,
    deterministic: bool, impl: str, sink_tokens: int = 0,
) -> Tuple[Tensor, Tensor]:  # fmt: skip
    """flashlab::fwd -> (out, lse). `deterministic` is for the backward (kept by the autograd context)."""
    q, k, v = _last_dim_contiguous(q), _last_dim_contiguous(k), _last_dim_contiguous(v)
    # empty_like / new_empty: a third of torch.empty(shape, dtype=, device=)'s host time.
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = q.new_empty(_lse_shape(q, cu_seqlens_q is not None), dtype=torch.float32)
    options = _options(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, alibi_slopes, sink_logits,
                       rng_state, softmax_scale, causal, causal_align, window_left, window_right, softcap,
                       dropout_p, impl, sink_tokens)  # fmt: skip
    _call(_core.forward, q, q, k, v, out, lse, **options)
    return out, lse


def _fwd_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, *args):
    lse_shape = _lse_shape(q, cu_seqlens_q is not None)
    return q.new_empty(q.shape), q.new_empty(lse_shape, dtype=torch.float32)


def _dsink_shape(q: Tensor, sink_logits: Optional[Tensor], sink_grad: bool) -> List[int]:
    """(heads_q,) when the backward computes dsink, else (0,); q.shape[-2] is heads_q in both layouts."""
    return [q.shape[-2] if sink_grad and sink_logits is not None else 0]


def _bwd(
    dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
    cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor],
    max_seqlen_q: int, max_seqlen_k: int,
    alibi_slopes: Optional[Tensor], sink_logits: Optional[Tensor], rng_state: Optional[Tensor],
    softmax_scale: Optional[float], causal: bool, causal_align: str,
    window_left: int, window_right: int, softcap: float, dropout_p: float,
    deterministic: bool, impl: str, sink_grad: bool, sink_tokens: int = 0,
) -> Tuple[Tensor, Tensor, Tensor, Tensor]:  # fmt: skip
    """flashlab::bwd -> (dq, dk, dv, dsink): dq, dk, dv contiguous, shaped like q, k, v; dsink fp32
    (heads_q,) with sink_grad and sink_logits, else (0,) (see the schema)."""
    dout, q, k, v, out = (_last_dim_contiguous(t) for t in (dout, q, k, v, out))
    dq, dk, dv = (torch.empty_like(t, memory_format=torch.contiguous_format) for t in (q, k, v))
    want_dsink = sink_grad and sink_logits is not None
    dsink = q.new_empty(_dsink_shape(q, sink_logits, sink_grad), dtype=torch.float32)
    options = _options(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, alibi_slopes, sink_logits,
                       rng_state, softmax_scale, causal, causal_align, window_left, window_right, softcap,
                       dropout_p, impl, sink_tokens)  # fmt: skip
    _call(_core.backward, q, dout, q, k, v, out, lse, dq, dk, dv, deterministic=deterministic,
          dsink=_capsule(dsink) if want_dsink else None, **options)  # fmt: skip
    return dq, dk, dv, dsink


def _bwd_fake(dout, q, k, v, out, lse, cu_q, cu_k, max_q, max_k, alibi, sink_logits, *args):
    dsink = q.new_empty(_dsink_shape(q, sink_logits, args[_SINK_GRAD_AFTER_SINKS]), dtype=torch.float32)
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape), dsink


# Kernels for every backend (what custom_op registers for device_types=None), and the fake ones.
_lib.impl("fwd", _fwd, "CompositeExplicitAutograd")
_lib.impl("bwd", _bwd, "CompositeExplicitAutograd")
torch.library.register_fake("flashlab::fwd", _fwd_fake, lib=_lib)
torch.library.register_fake("flashlab::bwd", _bwd_fake, lib=_lib)
_FWD = torch.ops.flashlab.fwd.default
_BWD = torch.ops.flashlab.bwd.default
_BELOW_AUTOGRAD = torch._C._after_autograd_keyset


class _FwdFunction(torch.autograd.Function):
    """flashlab::fwd with flashlab::bwd as its derivative, for q, k, v and sink_logits; LSE is not
    differentiable. keyset None: the eager path (_eager), which calls the kernels' Python functions
    directly instead of redispatching the ops."""

    @staticmethod
    def forward(ctx, keyset, q, k, v, cu_q, cu_k, max_q, max_k, alibi, sinks, rng_state, *scalars):
        if keyset is None:
            out, lse = _fwd(q, k, v, cu_q, cu_k, max_q, max_k, alibi, sinks, rng_state, *scalars)
        else:
            with torch._C._AutoDispatchBelowAutograd():
                out, lse = _FWD.redispatch(keyset, q, k, v, cu_q, cu_k, max_q, max_k, alibi, sinks, rng_state,
                                           *scalars)  # fmt: skip
        ctx.eager = keyset is None
        ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k, alibi, sinks, rng_state)
        ctx.scalars = (max_q, max_k) + scalars
        # LSE is an output for inspection (flash-attn's return_attn_probs), not a differentiable one.
        ctx.mark_non_differentiable(lse)
        # No zero tensor for LSE's (always absent) gradient: materializing it cost an allocation and
        # a fill kernel on every backward (torch.profiler on an H100: aten::zeros per call).
        ctx.set_materialize_grads(False)
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        # The forward's inputs after q, k, v: cu_q, cu_k, alibi, sinks, rng_state and ctx.scalars (with
        # or without sink_tokens, as the op was called).
        n_options = 5 + len(ctx.scalars)
        if dout is None:  # only LSE was used downstream: nothing flows back
            return (None,) * (4 + n_options)
        q, k, v, out, lse, cu_q, cu_k, alibi, sinks, rng_state = ctx.saved_tensors
        max_q, max_k, scale, causal, align, wl, wr, softcap, p, deterministic, impl, *rest = ctx.scalars
        n_sink_tokens = rest[0] if rest else 0
        sink_grad = ctx.needs_input_grad[_SINK_INPUT]  # False without sinks (None needs no grad)
        # The op unless the eager conditions hold now too; create_graph (grad mode on here) goes
        # through the op, whose autograd kernel refuses a double backward.
        bwd = _bwd if ctx.eager and not torch.is_grad_enabled() and _eager(dout) else _BWD
        dq, dk, dv, dsink = bwd(dout, q, k, v, out, lse, cu_q, cu_k, max_q, max_k, alibi, sinks, rng_state,
                                scale, causal, align, wl, wr, softcap, p, deterministic, impl, sink_grad,
                                n_sink_tokens)  # fmt: skip
        grads = [None, dq, dk, dv] + [None] * n_options
        grads[_SINK_INPUT] = dsink if sink_grad else None
        return tuple(grads)


class _BwdFunction(torch.autograd.Function):
    """flashlab::bwd under autograd (create_graph=True): no derivative (double backward, of
    dq/dk/dv/dsink in anything, is not supported)."""

    @staticmethod
    def forward(ctx, keyset, *args):
        with torch._C._AutoDispatchBelowAutograd():
            return _BWD.redispatch(keyset, *args)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("flashlab::bwd has no derivative: double backward is not supported")


def _load_torch_ext():
    """flashlab._torch_ext (python/src/torch_ext.cpp): the eager backward as a C++ autograd node, or
    None where it was not built or was built against another torch (the Python Function then serves).
    FLASHLAB_TORCH_EXT=0 in the environment turns it off, read per call (A/B timing, debugging)."""
    try:
        from . import _torch_ext, _torch_ext_build
    except ImportError:
        return None
    if _torch_ext_build.TORCH_VERSION != torch.__version__:
        return None
    _torch_ext.set_errors(FlashlabError, UnsupportedError)
    return _torch_ext


_ext = _load_torch_ext()


def _ext_active():
    """_torch_ext unless missing or turned off (FLASHLAB_TORCH_EXT=0) for this call."""
    return _ext if _environ.get("FLASHLAB_TORCH_EXT") != "0" else None


def _forward(keyset, args):
    """The forward with autograd where an input needs it (q, k, v or sink_logits), else the kernel
    alone. keyset: below the Autograd key (the op's autograd kernel), or None: eager, without the
    dispatcher (_attention, _eager). Eager calls with _torch_ext attach its C++ node to `out`
    instead of applying _FwdFunction: the backward then runs without Python."""
    if torch.is_grad_enabled() and _any_requires_grad(*args):
        ext = _ext_active() if keyset is None else None
        if ext is not None:
            out, lse = _fwd(*args)
            ext.attach(out, lse, *args)
            return out, lse
        return _FwdFunction.apply(keyset, *args)
    if keyset is None:
        return _fwd(*args)
    with torch._C._AutoDispatchBelowAutograd():
        return _FWD.redispatch(keyset, *args)


def _fwd_autograd(keyset, *args):
    return _forward(keyset & _BELOW_AUTOGRAD, args)


def _bwd_autograd(keyset, *args):
    keyset = keyset & _BELOW_AUTOGRAD
    if torch.is_grad_enabled() and _any_requires_grad(*args):
        return _BwdFunction.apply(keyset, *args)
    with torch._C._AutoDispatchBelowAutograd():
        return _BWD.redispatch(keyset, *args)


_lib.impl("fwd", _fwd_autograd, "Autograd", with_keyset=True)
_lib.impl("bwd", _bwd_autograd, "Autograd", with_keyset=True)


# ---------------------------------------------------------------------------------------------
# The public function
# ---------------------------------------------------------------------------------------------
def _rng_state(dropout_p: float, generator: Optional[torch.Generator], offset: int) -> Optional[Tensor]:
    """[seed, offset] as a CPU int64 tensor (None without dropout). The seed is drawn from a CPU
    generator (torch.manual_seed makes it reproducible); forward and backward read the same tensor,
    so they draw the same keep-mask. A tensor rather than a Python int so that torch.compile draws a
    fresh seed on every call instead of baking one into the graph."""
    if dropout_p <= 0.0:
        return None
    seed = torch.randint(0, 2**62, (1,), dtype=torch.int64, generator=generator)
    return torch.cat([seed, torch.full((1,), offset, dtype=torch.int64)])


def _check_sink_logits(q: Tensor, sink_logits) -> None:
    """The C++ layer checks sink_logits too, but in its terms (DLPack dtype codes, device ids); here
    the message speaks torch. No implicit cast to fp32: a bf16 parameter would silently get its
    gradient through a cast the caller did not write; `sink_logits.float()` is that cast, explicit
    (and differentiable)."""
    if not isinstance(sink_logits, Tensor):
        raise TypeError(f"flashlab: sink_logits must be a torch.Tensor (float32, (heads_q,)), "
                        f"not {type(sink_logits).__name__}")  # fmt: skip
    heads_q = q.shape[-2]  # (batch, seqlen, heads, dim) or packed (total, heads, dim)
    if sink_logits.dtype != torch.float32:
        raise FlashlabError(f"sink_logits.dtype ({sink_logits.dtype}) must be torch.float32: one fp32 logit per "
                            "query head (sink_logits.float() converts a parameter, differentiably)")  # fmt: skip
    if sink_logits.dim() != 1 or sink_logits.shape[0] != heads_q:
        raise FlashlabError(f"sink_logits.shape {tuple(sink_logits.shape)} must be (heads_q,) = ({heads_q},): "
                            "one logit per query head")  # fmt: skip
    if sink_logits.device != q.device:
        raise FlashlabError(f"sink_logits is on {sink_logits.device}; it must be on q's device ({q.device})")


def _eager(*tensors) -> bool:
    """Whether a call may skip the dispatcher: plain torch.Tensor arguments (or None), and nothing
    that needs to see the op: no torch.compile / export tracing, no torch function or dispatch mode
    (FakeTensorMode, FlopCounterMode, torch.device(...) as a context), no functorch transform.

    Each pass through the dispatcher boxes the op's 20 arguments from Python and back. An eager
    forward with inputs requiring grad made two (the op, then its autograd kernel's redispatch),
    the forward + backward four. Skipping them took a forward's host time from 59 to 44 µs on
    session 15's H100 machine (docs/perf.md, "Host path: eager calls without the dispatcher"),
    which matters where the kernel is short and a call after an L2 flush waits for the host."""
    if torch.compiler.is_compiling() or _dispatch_modes() or _function_modes() or _functorch_level() is not None:
        return False
    for t in tensors:
        if t is not None and type(t) is not Tensor:
            return False
    return True


_dispatch_modes = torch._C._len_torch_dispatch_stack
_function_modes = torch._C._is_torch_function_mode_enabled
_functorch_level = torch._C._functorch.peek_interpreter_stack


def _attention(q, k, v, *, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None,
               softmax_scale=None, causal=False, causal_align="bottom_right", window=(-1, -1),
               softcap=0.0, alibi_slopes=None, sink_logits=None, dropout_p=0.0, generator=None,
               dropout_offset=0, deterministic=False, impl="auto", sink_tokens=0) -> Tuple[Tensor, Tensor]:  # fmt: skip
    """(out, lse) through flashlab::fwd, or in eager mode (_eager) the same autograd Function and
    kernel without the dispatcher; shared by attention() and flash_attn_interface."""
    if sink_logits is not None:
        _check_sink_logits(q, sink_logits)
    rng_state = _rng_state(dropout_p, generator, dropout_offset)
    args = (q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q or 0, max_seqlen_k or 0, alibi_slopes,
            sink_logits, rng_state, softmax_scale, causal, causal_align, int(window[0]), int(window[1]),
            float(softcap), float(dropout_p), deterministic, impl, int(sink_tokens))  # fmt: skip
    if not _eager(q, k, v, cu_seqlens_q, cu_seqlens_k, alibi_slopes, sink_logits):
        return _FWD(*args)
    return _forward(None, args)


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    causal: bool = False,
    softmax_scale: Optional[float] = None,
    window: Tuple[int, int] = (-1, -1),
    sink_tokens: int = 0,
    softcap: float = 0.0,
    alibi_slopes: Optional[Tensor] = None,
    sink_logits: Optional[Tensor] = None,
    dropout_p: float = 0.0,
    generator: Optional[torch.Generator] = None,
    dropout_offset: int = 0,
    causal_align: str = "bottom_right",
    cu_seqlens_q: Optional[Tensor] = None,
    cu_seqlens_k: Optional[Tensor] = None,
    max_seqlen_q: Optional[int] = None,
    max_seqlen_k: Optional[int] = None,
    deterministic: bool = False,
    impl: str = "auto",
    return_lse: bool = False,
):
    """Scaled dot-product attention on (batch, seqlen, heads, head_dim) tensors, CPU or CUDA.

    Args:
        q: (batch, seqlen_q, heads_q, head_dim); k, v: (batch, seqlen_k, heads_kv, head_dim) with
            heads_q a multiple of heads_kv (GQA/MQA). With ``cu_seqlens_q/k`` (int32, batch + 1,
            on q's device) the tensors are packed (total_tokens, heads, head_dim) and
            ``max_seqlen_q/k`` bound the sequence lengths.
        causal: mask keys after the diagonal, anchored by ``causal_align``: ``"bottom_right"``
            (flash-attn: the last query sees every key) or ``"top_left"`` (SDPA's ``is_causal``).
        softmax_scale: default 1/sqrt(head_dim).
        window: (left, right) sliding window around the diagonal; -1 = unbounded.
        sink_tokens: StreamingLLM sink tokens: the first ``sink_tokens`` keys stay visible to every
            row left of its window, never right of its right bound (0 = off; without a left window
            they change nothing). CPU only for now: CUDA raises ``UnsupportedError``.
            docs/algorithm.md, "Masks". Not to be confused with ``sink_logits``.
        softcap: > 0 replaces each score s by softcap * tanh(s / softcap).
        alibi_slopes: fp32 (heads_q,) or (batch, heads_q): s -= slope * |i + shift - j|.
        sink_logits: attention sinks (gpt-oss; FA3's "learnable sink"): fp32 (heads_q,) on q's
            device, one logit per query head that joins every row's softmax denominator and carries
            no value: lse = log(exp(sink_h) + sum_j exp(s_ij)), out = sum_j exp(s_ij - lse) v_j,
            with s the final scores (after scale, softcap, ALiBi; the sink itself is not scaled).
            A row that sees no key gets out 0 and lse = sink_h; -inf is no sink. Learnable: when
            it requires grad, backward gives its gradient, dL/dsink_h = -sum over the batch and
            the rows of head h of exp(sink_h - lse_i) * D_i, D_i = dout_i . out_i (frozen sinks,
            not requiring grad, get none computed). docs/algorithm.md, "Attention sinks".
        dropout_p: dropout on the attention probabilities. The mask comes from flashlab's Philox
            keying (docs/dropout.md), seeded from ``generator`` (a CPU torch.Generator; default
            torch's global one) and ``dropout_offset``.
        deterministic: a backward pass without order-dependent atomics.
        impl: "auto" or an implementation name from ``flashlab.implementations()``.
        return_lse: also return the log-sum-exp, fp32 (batch, heads_q, seqlen_q) or
            (heads_q, total_q) when packed, sinks included. It is not differentiable.

    Returns:
        ``out`` (like q), or ``(out, lse)`` when ``return_lse``.
    """
    out, lse = _attention(
        q, k, v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
        max_seqlen_k=max_seqlen_k, softmax_scale=softmax_scale, causal=causal,
        causal_align=causal_align, window=window, softcap=softcap, alibi_slopes=alibi_slopes,
        sink_logits=sink_logits, dropout_p=dropout_p, generator=generator, dropout_offset=dropout_offset,
        deterministic=deterministic, impl=impl, sink_tokens=sink_tokens,
    )  # fmt: skip
    return (out, lse) if return_lse else out


# The KV-cache path (flashlab::kvcache_attention / kvcache_combine and the decode object) lives in
# _torch_kvcache.py; imported last, since it registers its ops on _lib above.
from ._torch_kvcache import KVCacheDecoder, attention_combine, attention_with_kvcache  # noqa: E402

__all__ += ["KVCacheDecoder", "attention_combine", "attention_with_kvcache"]
