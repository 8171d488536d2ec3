"""NumPy conveniences: allocate the outputs, call flashlab._core, return them (CPU backends).

NumPy has no bfloat16, so these take float32 and float16 arrays; bf16 on the CPU works through
``flashlab.torch`` (or any DLPack producer that has it, passed to ``flashlab._core`` directly).
"""

from typing import Optional, Tuple

import numpy as np

from . import _core


def _array(name: str, x) -> np.ndarray:
    """``x`` as an ndarray; anything that is not an array (a list, None, a number) is a TypeError."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "__array__") or hasattr(x, "__dlpack__"):  # array-likes: torch CPU tensors, ...
        return np.asarray(x)
    raise TypeError(
        f"flashlab: {name} must be a NumPy array (or an object with __array__ / __dlpack__), "
        f"not {type(x).__name__}; e.g. np.asarray({name}, dtype=np.float32)"
    )


def _lse_shape(q: np.ndarray, cu_seqlens_q) -> Tuple[int, ...]:
    if cu_seqlens_q is not None:  # packed (total_q, heads, head_dim)
        return (q.shape[1], q.shape[0])
    return (q.shape[0], q.shape[2], q.shape[1])


def attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    causal_align: str = "bottom_right",
    window: Tuple[int, int] = (-1, -1),
    sink_tokens: int = 0,
    softcap: float = 0.0,
    alibi_slopes: Optional[np.ndarray] = None,
    sink_logits: Optional[np.ndarray] = None,
    dropout_p: float = 0.0,
    dropout_seed: int = 0,
    dropout_offset: int = 0,
    cu_seqlens_q: Optional[np.ndarray] = None,
    cu_seqlens_k: Optional[np.ndarray] = None,
    max_seqlen_q: Optional[int] = None,
    max_seqlen_k: Optional[int] = None,
    impl: str = "auto",
    num_threads: int = 0,
) -> Tuple[np.ndarray, np.ndarray]:
    """Attention forward on NumPy arrays; returns ``(out, lse)``.

    q: (batch, seqlen_q, heads_q, head_dim); k, v: (batch, seqlen_k, heads_kv, head_dim), or packed
    (total_tokens, heads, head_dim) with ``cu_seqlens_q/k`` (int32, batch + 1) and
    ``max_seqlen_q/k``. ``out`` has q's shape and dtype; ``lse`` is float32 (batch, heads_q,
    seqlen_q), or (heads_q, total_q) for packed inputs. ``window`` is (left, right), -1 unbounded.
    ``sink_tokens``: StreamingLLM sink tokens, the first ``sink_tokens`` keys visible to every row
    left of its window, never right of its right bound (0 = off; docs/algorithm.md, "Masks").
    ``sink_logits``: float32 (heads_q,) attention sinks, one logit per query head in every row's
    softmax denominator (no value); a row that sees no key then gets lse = its sink. CPU backends.
    """
    q, k, v = (_array(n, x) for n, x in (("q", q), ("k", k), ("v", v)))
    if sink_logits is not None:
        sink_logits = np.ascontiguousarray(sink_logits, dtype=np.float32)
    out = np.empty(q.shape, dtype=q.dtype)
    lse = np.empty(_lse_shape(q, cu_seqlens_q), dtype=np.float32)
    _core.forward(
        q, k, v, out, lse,
        softmax_scale=softmax_scale, causal=causal, causal_align=causal_align,
        window_left=window[0], window_right=window[1], sink_tokens=sink_tokens, softcap=softcap,
        alibi_slopes=alibi_slopes, sink_logits=sink_logits, dropout_p=dropout_p, dropout_seed=dropout_seed,
        dropout_offset=dropout_offset, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
        max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
        impl=impl, num_threads=num_threads,
    )  # fmt: skip
    return out, lse


def attention_backward(
    dout: np.ndarray,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    out: np.ndarray,
    lse: np.ndarray,
    *,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    causal_align: str = "bottom_right",
    window: Tuple[int, int] = (-1, -1),
    sink_tokens: int = 0,
    softcap: float = 0.0,
    alibi_slopes: Optional[np.ndarray] = None,
    sink_logits: Optional[np.ndarray] = None,
    dropout_p: float = 0.0,
    dropout_seed: int = 0,
    dropout_offset: int = 0,
    cu_seqlens_q: Optional[np.ndarray] = None,
    cu_seqlens_k: Optional[np.ndarray] = None,
    max_seqlen_q: Optional[int] = None,
    max_seqlen_k: Optional[int] = None,
    deterministic: bool = False,
    impl: str = "auto",
    num_threads: int = 0,
) -> Tuple[np.ndarray, ...]:
    """Attention backward on NumPy arrays; returns ``(dq, dk, dv)``, or ``(dq, dk, dv, dsink)``
    with ``sink_logits`` (dsink: float32 (heads_q,), the gradient of the sink logits).

    Takes the forward's ``out`` and ``lse`` and the same options (dropout seed and offset too, so
    the backward regenerates the forward's keep-mask).
    """
    named = (("dout", dout), ("q", q), ("k", k), ("v", v), ("out", out), ("lse", lse))
    dout, q, k, v, out, lse = (_array(n, x) for n, x in named)
    dq = np.empty(q.shape, dtype=q.dtype)
    dk = np.empty(k.shape, dtype=k.dtype)
    dv = np.empty(v.shape, dtype=v.dtype)
    dsink = None
    if sink_logits is not None:
        sink_logits = np.ascontiguousarray(sink_logits, dtype=np.float32)
        dsink = np.empty(sink_logits.shape, dtype=np.float32)
    _core.backward(
        dout, q, k, v, out, lse, dq, dk, dv,
        softmax_scale=softmax_scale, causal=causal, causal_align=causal_align,
        window_left=window[0], window_right=window[1], sink_tokens=sink_tokens, softcap=softcap,
        alibi_slopes=alibi_slopes, sink_logits=sink_logits, dropout_p=dropout_p, dropout_seed=dropout_seed,
        dropout_offset=dropout_offset, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
        max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
        deterministic=deterministic, impl=impl, num_threads=num_threads, dsink=dsink,
    )  # fmt: skip
    return (dq, dk, dv) if dsink is None else (dq, dk, dv, dsink)
