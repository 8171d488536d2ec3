"""The KV-cache path (docs/kvcache.md) as PyTorch custom ops, and the decode object.

Imported by flashlab.torch, which re-exports the public names; the conventions are torch.py's
(torch.library.Library, fake kernels, DLPack capsules, the current stream, no host sync).

Ops (schemas in _KV_SCHEMA below):

* ``flashlab::kvcache_attention(q, k_cache!, v_cache!, cache_seqlens, k?, v?, ...) -> (out, lse)``:
  appends k/v into the caches in place (declared ``Tensor(a!)``; the caller's ``cache_seqlens`` is
  read, never written) and attends q to the cache. Allocates out/lse (and, on CUDA, the split-KV
  workspace) with ``torch.empty``.
* ``flashlab::kvcache_attention_out(..., out!, lse!, workspace?) -> ()``: the same into
  caller-owned tensors and workspace: allocates nothing (what :class:`KVCacheDecoder` runs).
* ``flashlab::kvcache_combine(out_partial, lse_partial, out_dtype?) -> (out, lse)`` and
  ``flashlab::kvcache_combine_out(out_partial, lse_partial, out!, lse!) -> ()``: the split merge.

``check_device_data`` (a schema argument, False by default in the Python functions) is the one
exception to "no host sync": on CUDA it copies the int32 side tensors to the host and checks them
first (docs/kvcache.md, "Validation"), so the kernels refuse it during CUDA-graph capture.

Kernels are registered for every device: the C++ library decides (CPU tensors run ``cpu_flash`` or
``reference``; CUDA tensors the CUDA decode kernel where the build has it, else
``flashlab.UnsupportedError``).
"""

from typing import Optional, Tuple, Union

import torch
from torch import Tensor
from torch.utils.dlpack import to_dlpack

from . import _core
from ._core import FlashlabError
from .torch import _allocate_workspace, _capsule, _current_stream, _eager, _lib, _last_dim_contiguous

# ---------------------------------------------------------------------------------------------
# Schemas
# ---------------------------------------------------------------------------------------------
_KV_SCHEMA = (
    "Tensor q, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor cache_seqlens, Tensor? k, Tensor? v, "
    "Tensor? rotary_cos, Tensor? rotary_sin, bool rotary_interleaved, Tensor? cache_batch_idx, "
    "Tensor? cache_leftpad, Tensor? block_table, str page_layout, float? softmax_scale, bool causal, "
    "int window_left, int window_right, float softcap, Tensor? alibi_slopes, Tensor? sink_logits, int num_splits, "
    "int split_size, bool check_device_data, str impl"
)
_N_KV_OPTIONS = 20  # the schema's arguments after cache_seqlens: k ... impl
# StreamingLLM sink tokens came after the others: each op's last argument, with a default (torch.py's
# flashlab::fwd has the same; the kernels get only the arguments given, hence their own default).
_SINK_TOKENS = "int sink_tokens=0"
_TAGS = (torch.Tag.pt2_compliant_tag,)
_lib.define("kvcache_attention(" + _KV_SCHEMA + ", " + _SINK_TOKENS + ") -> (Tensor, Tensor)", tags=_TAGS)
_lib.define("kvcache_attention_out(" + _KV_SCHEMA + ", Tensor(c!) out, Tensor(d!) lse, Tensor? workspace, "
            + _SINK_TOKENS + ") -> ()", tags=_TAGS)  # fmt: skip
_lib.define("kvcache_combine(Tensor out_partial, Tensor lse_partial, ScalarType? out_dtype) -> (Tensor, Tensor)",
            tags=_TAGS)  # fmt: skip
_lib.define("kvcache_combine_out(Tensor out_partial, Tensor lse_partial, Tensor(a!) out, Tensor(b!) lse) -> ()",
            tags=_TAGS)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------
def _launch(fn, q: Tensor, workspace: Optional[Tensor], *capsules, **options):
    """fn(*capsules, **options) on q's device and current stream. The workspace: `workspace` when
    given (the binding checks it is large enough), else torch.empty on the current device. Refuses
    check_device_data (a host synchronization) inside CUDA-graph capture."""
    if not q.is_cuda:
        fn(*capsules, stream=0, **options)
        return
    if options.get("check_device_data") and torch.cuda.is_current_stream_capturing():
        # The host copy would synchronize the stream, which breaks (invalidates) the capture.
        raise FlashlabError("check_device_data copies cache_seqlens / block_table / ... to the host and "
                            "synchronizes the stream: not allowed during CUDA-graph capture (pass "
                            "check_device_data=False, or plan the KVCacheDecoder without it)")  # fmt: skip
    alloc = _allocate_workspace if workspace is None else (lambda nbytes: to_dlpack(workspace))
    if q.device.index == torch.cuda.current_device():
        fn(*capsules, stream=_current_stream(q.device), workspace=alloc, **options)
        return
    with torch.cuda.device(q.device):
        fn(*capsules, stream=_current_stream(q.device), workspace=alloc, **options)


def _kv_options(k, v, rotary_cos, rotary_sin, rotary_interleaved, cache_batch_idx, cache_leftpad, block_table,
                page_layout, softmax_scale, causal, window_left, window_right, softcap, alibi_slopes, sink_logits,
                num_splits, split_size, check_device_data, impl, sink_tokens=0) -> dict:  # fmt: skip
    return dict(
        k=_capsule(None if k is None else _last_dim_contiguous(k)),
        v=_capsule(None if v is None else _last_dim_contiguous(v)),
        rotary_cos=_capsule(rotary_cos), rotary_sin=_capsule(rotary_sin), rotary_interleaved=rotary_interleaved,
        cache_batch_idx=_capsule(cache_batch_idx), cache_leftpad=_capsule(cache_leftpad),
        block_table=_capsule(block_table), page_layout=page_layout, softmax_scale=softmax_scale, causal=causal,
        window_left=window_left, window_right=window_right, softcap=softcap, alibi_slopes=_capsule(alibi_slopes),
        sink_logits=_capsule(sink_logits), num_splits=num_splits, split_size=split_size,
        check_device_data=check_device_data, impl=impl, sink_tokens=sink_tokens,
    )  # fmt: skip


def _lse_shape(q: Tensor):
    return (q.shape[0], q.shape[2], q.shape[1])


def _kvcache_attention(q, k_cache, v_cache, cache_seqlens, *options):
    q = _last_dim_contiguous(q)
    out = q.new_empty(q.shape)   # new_empty: about half of torch.empty(shape, dtype=, device=)'s host time
    lse = q.new_empty(_lse_shape(q), dtype=torch.float32)
    _launch(_core.attention_with_kvcache, q, None, to_dlpack(q), to_dlpack(k_cache), to_dlpack(v_cache),
            to_dlpack(cache_seqlens), to_dlpack(out), to_dlpack(lse), **_kv_options(*options))  # fmt: skip
    return out, lse


def _kvcache_attention_fake(q, *args):
    return q.new_empty(q.shape), q.new_empty(_lse_shape(q), dtype=torch.float32)


def _kvcache_attention_out(q, k_cache, v_cache, cache_seqlens, *rest):
    options, (out, lse, workspace), sink_tokens = rest[:_N_KV_OPTIONS], rest[_N_KV_OPTIONS:_N_KV_OPTIONS + 3], \
        rest[_N_KV_OPTIONS + 3:]  # fmt: skip
    _launch(_core.attention_with_kvcache, q, workspace, to_dlpack(_last_dim_contiguous(q)), to_dlpack(k_cache),
            to_dlpack(v_cache), to_dlpack(cache_seqlens), to_dlpack(out), to_dlpack(lse),
            **_kv_options(*options, *sink_tokens))  # fmt: skip


def _kvcache_attention_out_fake(*args):
    return None


def _combine_inputs(out_partial: Tensor, lse_partial: Tensor):
    if out_partial.dim() != 5:
        raise FlashlabError(f"out_partial.shape {tuple(out_partial.shape)} must be "
                            "(num_splits, batch, seqlen_q, heads, head_dim)")  # fmt: skip
    return out_partial.shape[1:], (out_partial.shape[1], out_partial.shape[3], out_partial.shape[2])


def _kvcache_combine(out_partial, lse_partial, out_dtype):
    out_shape, lse_shape = _combine_inputs(out_partial, lse_partial)
    out = torch.empty(out_shape, dtype=out_dtype or out_partial.dtype, device=out_partial.device)
    lse = torch.empty(lse_shape, dtype=torch.float32, device=out_partial.device)
    _kvcache_combine_out(out_partial, lse_partial, out, lse)
    return out, lse


def _kvcache_combine_fake(out_partial, lse_partial, out_dtype):
    out_shape, lse_shape = _combine_inputs(out_partial, lse_partial)
    return (out_partial.new_empty(out_shape, dtype=out_dtype or out_partial.dtype),
            out_partial.new_empty(lse_shape, dtype=torch.float32))  # fmt: skip


def _kvcache_combine_out(out_partial, lse_partial, out, lse):
    _launch(_core.attention_combine, out_partial, None, to_dlpack(_last_dim_contiguous(out_partial)),
            to_dlpack(lse_partial), to_dlpack(out), to_dlpack(lse))  # fmt: skip


for _name, _fn, _fake in (
    ("kvcache_attention", _kvcache_attention, _kvcache_attention_fake),
    ("kvcache_attention_out", _kvcache_attention_out, _kvcache_attention_out_fake),
    ("kvcache_combine", _kvcache_combine, _kvcache_combine_fake),
    ("kvcache_combine_out", _kvcache_combine_out, _kvcache_attention_out_fake),
):
    _lib.impl(_name, _fn, "CompositeExplicitAutograd")
    torch.library.register_fake("flashlab::" + _name, _fake, lib=_lib)

_KV = torch.ops.flashlab.kvcache_attention.default
_KV_OUT = torch.ops.flashlab.kvcache_attention_out.default
_COMBINE = torch.ops.flashlab.kvcache_combine.default
_COMBINE_OUT = torch.ops.flashlab.kvcache_combine_out.default


# ---------------------------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------------------------
def _int32(name: str, x: Optional[Tensor]) -> Optional[Tensor]:
    """int32 and contiguous (a device-side conversion where needed: no host sync)."""
    if x is None:
        return None
    if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
        raise TypeError(f"flashlab: {name} must hold integers (int32), not {x.dtype}")
    return x if x.dtype == torch.int32 and x.is_contiguous() else x.to(torch.int32).contiguous()


def _f32(x: Optional[Tensor]) -> Optional[Tensor]:
    return None if x is None else x.detach().to(torch.float32).contiguous()


_TABLE_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _tables(cos: Optional[Tensor], sin: Optional[Tensor]):
    """Rotary tables as the library reads them: fp32, bf16 or fp16 (a 16-bit table is used as its
    exact fp32 values, no conversion kernel), both of one type, contiguous; anything else (or a
    mixed pair) is converted to fp32 on its device."""
    if cos is None or sin is None or cos.dtype != sin.dtype or cos.dtype not in _TABLE_DTYPES:
        return _f32(cos), _f32(sin)
    return tuple(x.detach().contiguous() if x.requires_grad else x.contiguous() for x in (cos, sin))


def _seqlens(cache_seqlens: Union[int, Tensor], batch: int, device) -> Tensor:
    if isinstance(cache_seqlens, int):
        return torch.full((batch,), cache_seqlens, dtype=torch.int32, device=device)
    return _int32("cache_seqlens", cache_seqlens)


def attention_with_kvcache(
    q: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
    cache_seqlens: Union[int, Tensor],
    *,
    k: Optional[Tensor] = None,
    v: Optional[Tensor] = None,
    rotary_cos: Optional[Tensor] = None,
    rotary_sin: Optional[Tensor] = None,
    rotary_interleaved: bool = False,
    cache_batch_idx: Optional[Tensor] = None,
    cache_leftpad: Optional[Tensor] = None,
    block_table: Optional[Tensor] = None,
    page_layout: str = "NHD",
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    window_size: Tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Optional[Tensor] = None,
    num_splits: int = 0,
    split_size: int = 0,
    impl: str = "auto",
    sink_logits: Optional[Tensor] = None,
    check_device_data: bool = False,
    sink_tokens: int = 0,
) -> Tuple[Tensor, Tensor]:
    """``flashlab.attention_with_kvcache`` on torch tensors through ``flashlab::kvcache_attention``;
    returns ``(out, lse)``. Same arguments and semantics (docs/kvcache.md): ``k``/``v`` are appended
    **in place** into ``k_cache``/``v_cache`` at slots ``cache_seqlens[b]`` ..; ``cache_seqlens`` is
    not updated. Integer side tensors are converted to int32, ALiBi slopes and sink logits to fp32,
    rotary tables to fp32 unless both are fp32, bf16 or fp16 (read as they are) (on their device;
    no host synchronization). Not differentiable (inputs are
    detached).

    ``sink_logits``: (heads_q,) attention sinks on q's device (docs/kvcache.md, "Attention sinks"):
    one logit per query head in every row's softmax denominator with no value; a row that sees no
    key gets out 0 and lse = sink_h, a sink of -inf is no sink. Forward only (the sinks get no
    gradient here; training sinks are ``flashlab.torch.attention``'s). The CPU refuses NaN / +inf
    logits; CUDA does not read them on the host.

    ``sink_tokens``: StreamingLLM sink tokens (docs/kvcache.md, "Mask and scores"): the first
    ``sink_tokens`` keys after ``cache_leftpad`` stay visible left of the window. CPU tensors only
    for now: on CUDA it raises :class:`flashlab.UnsupportedError` with nothing written.

    ``check_device_data``: on CUDA, copy ``cache_seqlens`` / ``cache_leftpad`` / ``cache_batch_idx``
    / ``block_table`` to the host and check them (lengths within the capacity, page indices and rows
    in range, ...) before anything is launched, so bad data raises :class:`flashlab.FlashlabError`
    with nothing written. This **synchronizes** the current stream, so such a call cannot be
    captured in a CUDA graph; meant for debugging. Without it, CUDA kernels guard their writes but
    may read what a bad entry names (docs/kvcache.md, "Validation"). On the CPU the side tensors are
    always checked; the flag changes nothing there."""
    q, k_cache, v_cache, k, v = (None if x is None else x.detach() if x.requires_grad else x
                                 for x in (q, k_cache, v_cache, k, v))
    seqlens = _seqlens(cache_seqlens, q.shape[0], q.device)
    cos, sin = _tables(rotary_cos, rotary_sin)
    slopes, sinks = _f32(alibi_slopes), _f32(sink_logits)
    batch_idx, leftpad = _int32("cache_batch_idx", cache_batch_idx), _int32("cache_leftpad", cache_leftpad)
    table = _int32("block_table", block_table)
    args = (
        q, k_cache, v_cache, seqlens, k, v, cos, sin, bool(rotary_interleaved), batch_idx, leftpad, table,
        page_layout, softmax_scale, bool(causal), int(window_size[0]), int(window_size[1]), float(softcap), slopes,
        sinks, int(num_splits), int(split_size), bool(check_device_data), impl, int(sink_tokens),
    )  # fmt: skip
    # Eager calls skip the dispatcher (flashlab.torch._eager): the op's Python kernel directly.
    if _eager(q, k_cache, v_cache, seqlens, k, v, cos, sin, batch_idx, leftpad, table, slopes, sinks):
        return _kvcache_attention(*args)
    return _KV(*args)


def attention_combine(out_partial: Tensor, lse_partial: Tensor, out_dtype: Optional[torch.dtype] = None, *,
                      out: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:  # fmt: skip
    """Merges split-KV partials through ``flashlab::kvcache_combine``; returns ``(out, lse)``.
    out_partial fp32 (num_splits, batch, seqlen_q, heads, head_dim), lse_partial fp32 (num_splits,
    batch, heads, seqlen_q); ``out`` (batch, seqlen_q, heads, head_dim) is written in place when
    given (``kvcache_combine_out``), else allocated in ``out_dtype`` (default out_partial's)."""
    out_partial = out_partial.detach().to(torch.float32)
    lse_partial = lse_partial.detach().to(torch.float32)
    if lse_partial.stride(-1) != 1 and lse_partial.shape[-1] > 1:
        lse_partial = lse_partial.contiguous()
    if out is None:
        return _COMBINE(out_partial, lse_partial, out_dtype)
    shape, lse_shape = _combine_inputs(out_partial, lse_partial)
    lse = torch.empty(lse_shape, dtype=torch.float32, device=out.device)
    _COMBINE_OUT(out_partial, lse_partial, out, lse)
    return out, lse


# ---------------------------------------------------------------------------------------------
# The decode object
# ---------------------------------------------------------------------------------------------
class KVCacheDecoder:
    """Decode steps against a K/V cache with everything fixed up front, for CUDA-graph capture.

        dec = flashlab.torch.KVCacheDecoder()
        dec.plan(batch=8, max_seqlen_cache=4096, heads_q=32, heads_kv=8, head_dim=128,
                 dtype=torch.bfloat16, device="cuda", page_size=16)
        out, lse = dec.run(q, k_cache, v_cache, cache_seqlens, block_table=block_table)

    ``plan()`` (host work, may allocate and synchronize) fixes the shapes and options, sizes the
    split-KV workspace with the C++ ``kvcache_workspace_size`` for them (the split count depends only
    on shapes and options, never on device data, so it is the same for every run), and allocates
    the workspace and the outputs ``out`` (batch, seqlen_q, heads_q, head_dim) and ``lse`` fp32
    (batch, heads_q, seqlen_q). ``run()`` checks shapes against the plan on the host (tensor
    metadata only), then calls ``flashlab::kvcache_attention_out`` into those buffers (or the
    ``out=`` / ``lse=`` given): it allocates nothing, reads ``cache_seqlens`` / ``block_table`` only
    on the device, and never synchronizes, so a ``torch.cuda.graph`` can capture it; each run
    overwrites the same ``out``/``lse`` (clone them to keep a result). On the CPU it just runs.
    Planned with ``check_device_data=True`` (debugging), every ``run()`` on CUDA copies the side
    tensors to the host and checks them first: it synchronizes, so it cannot be captured (a run
    during capture raises :class:`flashlab.FlashlabError` before anything is enqueued).

    Status: graph capture verified on an H100 (2026-11-24, python/tests/test_torch_kvcache_cuda.py):
    ``run()`` captured in ``torch.cuda.graph`` replays bit for bit equal to eager (contiguous cache
    and page 16), also after ``q`` and ``cache_seqlens`` are changed on the device. B 8, GQA 32/8,
    hdim 128, capacity 4096: contiguous eager 58.1 us, replay 43.8 us; page 16 eager 438.2 us,
    replay 69.9 us (the eager paged call's ~370 us of host-side overhead is not investigated yet).
    On the CPU the tests check that ``run()`` is deterministic and allocation-free in Python.
    """

    def __init__(self):
        self.out: Optional[Tensor] = None
        self.lse: Optional[Tensor] = None
        self.workspace: Optional[Tensor] = None
        self.workspace_bytes = 0
        self._plan = None

    def plan(
        self,
        batch: int,
        max_seqlen_cache: int,
        heads_q: int,
        heads_kv: int,
        head_dim: int,
        dtype: torch.dtype = torch.bfloat16,
        device: Union[str, torch.device] = "cuda",
        *,
        seqlen_q: int = 1,
        seqlen_new: int = 0,
        page_size: Optional[int] = None,
        page_layout: str = "NHD",
        rotary_dim: int = 0,
        rotary_interleaved: bool = False,
        alibi: bool = False,
        sinks: bool = False,
        softmax_scale: Optional[float] = None,
        causal: bool = False,
        window_size: Tuple[int, int] = (-1, -1),
        softcap: float = 0.0,
        num_splits: int = 0,
        split_size: int = 0,
        impl: str = "auto",
        check_device_data: bool = False,
        sink_tokens: int = 0,
    ) -> "KVCacheDecoder":
        """Fixes the problem: ``max_seqlen_cache`` is the capacity per sequence (with ``page_size``:
        max_pages * page_size, max_pages = ceil(max_seqlen_cache / page_size)); ``seqlen_new`` the
        number of k/v appended per run (0: none); ``rotary_dim`` > 0, ``alibi`` and ``sinks`` say
        whether rotary tables / ALiBi slopes / sink logits (fp32 (heads_q,)) will be passed to every
        ``run()``. ``check_device_data=True`` makes every run check the int32 side tensors on the
        host first (see :func:`attention_with_kvcache`): on CUDA each run then synchronizes and
        cannot be captured in a CUDA graph (refused during capture); for debugging. ``sink_tokens``:
        StreamingLLM sink tokens (the first keys after ``cache_leftpad`` stay visible left of the
        window; on CUDA one more split). Returns self."""
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        paged = page_size is not None
        max_pages = -(-max_seqlen_cache // page_size) if paged else 0
        capacity = max_pages * page_size if paged else max_seqlen_cache
        # Placeholders of the planned shapes. The caches broadcast one page (one slot when
        # contiguous) with stride 0: only shapes and the layout's stride order matter to
        # kvcache_workspace_size, and the real caches may be gigabytes.
        q = torch.empty((batch, seqlen_q, heads_q, head_dim), dtype=dtype, device=device)
        if paged:
            one = (1, page_size, heads_kv, head_dim) if page_layout == "NHD" else (1, heads_kv, page_size, head_dim)
            cache = torch.zeros(one, dtype=dtype, device=device).expand((batch * max_pages,) + one[1:])
        else:
            one = (1, 1, heads_kv, head_dim)
            cache = torch.zeros(one, dtype=dtype, device=device).expand((batch, capacity, heads_kv, head_dim))
        new = torch.zeros((head_dim,), dtype=dtype, device=device).expand((batch, seqlen_new, heads_kv, head_dim))
        seqlens = torch.full((batch,), capacity - seqlen_new, dtype=torch.int32, device=device)
        table = torch.arange(batch * max_pages, dtype=torch.int32, device=device).view(batch, max_pages)
        rot = torch.zeros((capacity, rotary_dim // 2), dtype=torch.float32, device=device) if rotary_dim else None
        slopes = torch.zeros((heads_q,), dtype=torch.float32, device=device) if alibi else None
        sink = torch.zeros((heads_q,), dtype=torch.float32, device=device) if sinks else None
        self._options = (rotary_interleaved, page_layout, softmax_scale, causal, int(window_size[0]),
                         int(window_size[1]), float(softcap), int(num_splits), int(split_size),
                         bool(check_device_data), impl, int(sink_tokens))  # fmt: skip
        self.out = torch.empty(q.shape, dtype=dtype, device=device)
        self.lse = torch.empty(_lse_shape(q), dtype=torch.float32, device=device)
        self.workspace_bytes = _core.kvcache_workspace_size(
            to_dlpack(q), to_dlpack(cache), to_dlpack(cache), to_dlpack(seqlens), to_dlpack(self.out),
            to_dlpack(self.lse), k=_capsule(new if seqlen_new else None), v=_capsule(new if seqlen_new else None),
            rotary_cos=_capsule(rot), rotary_sin=_capsule(rot), rotary_interleaved=rotary_interleaved,
            block_table=_capsule(table if paged else None), page_layout=page_layout, softmax_scale=softmax_scale,
            causal=causal, window_left=int(window_size[0]), window_right=int(window_size[1]), softcap=float(softcap),
            alibi_slopes=_capsule(slopes), sink_logits=_capsule(sink), num_splits=int(num_splits),
            split_size=int(split_size), impl=impl, sink_tokens=int(sink_tokens),
        )  # fmt: skip
        self.workspace = (torch.empty(self.workspace_bytes, dtype=torch.uint8, device=device)
                          if self.workspace_bytes > 0 else None)  # fmt: skip
        self._plan = dict(q=tuple(q.shape), dtype=dtype, device=device, paged=paged, seqlen_new=seqlen_new,
                          rotary=rotary_dim > 0, alibi=alibi, sinks=sinks)  # fmt: skip
        return self

    def run(
        self,
        q: Tensor,
        k_cache: Tensor,
        v_cache: Tensor,
        cache_seqlens: Tensor,
        block_table: Optional[Tensor] = None,
        *,
        k: Optional[Tensor] = None,
        v: Optional[Tensor] = None,
        rotary_cos: Optional[Tensor] = None,
        rotary_sin: Optional[Tensor] = None,
        cache_batch_idx: Optional[Tensor] = None,
        cache_leftpad: Optional[Tensor] = None,
        alibi_slopes: Optional[Tensor] = None,
        sink_logits: Optional[Tensor] = None,
        out: Optional[Tensor] = None,
        lse: Optional[Tensor] = None,
    ) -> Tuple[Tensor, Tensor]:
        """One step: appends k/v in place (when planned with seqlen_new > 0) and attends q; returns
        ``(out, lse)`` (the plan's buffers unless given). Side tensors must already be int32 /
        fp32 and contiguous, the rotary tables fp32, bf16 or fp16 (no conversions here: they would
        allocate). ``sink_logits`` fp32
        (heads_q,) is given exactly when planned with ``sinks=True``."""
        P = self._plan
        if P is None:
            raise FlashlabError("KVCacheDecoder.run() before plan()")
        if tuple(q.shape) != P["q"] or q.dtype != P["dtype"] or q.device != P["device"]:
            raise FlashlabError(f"q {tuple(q.shape)} {q.dtype} on {q.device} does not match the plan: "
                                f"{P['q']} {P['dtype']} on {P['device']}")  # fmt: skip
        if (block_table is not None) != P["paged"]:
            raise FlashlabError("block_table " + ("is required: the plan is paged (page_size)" if P["paged"]
                                                  else "given, but the plan has no page_size"))  # fmt: skip
        if ((k is not None) != (P["seqlen_new"] > 0) or (k is not None and k.shape[1] != P["seqlen_new"])):
            raise FlashlabError(f"k/v: the plan appends seqlen_new = {P['seqlen_new']} keys per run")
        if (rotary_cos is not None) != P["rotary"] or (alibi_slopes is not None) != P["alibi"]:
            raise FlashlabError("rotary_cos/sin and alibi_slopes must be given exactly when planned "
                                "(rotary_dim > 0, alibi=True)")  # fmt: skip
        if (sink_logits is not None) != P["sinks"]:
            raise FlashlabError("sink_logits must be given exactly when planned (sinks=True): the plan has "
                                + ("sinks" if P["sinks"] else "none"))  # fmt: skip
        out = self.out if out is None else out
        lse = self.lse if lse is None else lse
        (interleaved, layout, scale, causal, wl, wr, softcap, num_splits, split_size, check, impl,
         sink_tokens) = self._options  # fmt: skip
        op = (_kvcache_attention_out if _eager(q, k_cache, v_cache, cache_seqlens, k, v, rotary_cos, rotary_sin,
                                                cache_batch_idx, cache_leftpad, block_table, alibi_slopes,
                                                sink_logits, out, lse) else _KV_OUT)  # fmt: skip
        op(q, k_cache, v_cache, cache_seqlens, k, v, rotary_cos, rotary_sin, interleaved, cache_batch_idx,
           cache_leftpad, block_table, layout, scale, causal, wl, wr, softcap, alibi_slopes, sink_logits,
           num_splits, split_size, check, impl, out, lse, self.workspace, sink_tokens)  # fmt: skip
        return out, lse
