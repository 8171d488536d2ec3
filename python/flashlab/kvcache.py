"""Inference on NumPy arrays: attention against a K/V cache, the append, and the split-KV combine.

The semantics (slots, attended length, positions, rotary, splits) are pinned in docs/kvcache.md;
these functions allocate the outputs and call ``flashlab._core`` (the C++ API, CPU reference).
The caches are the caller's arrays and are written **in place** when new ``k``/``v`` are given.
The small int32 side arrays (``cache_seqlens``, ``block_table``, ...) and the rotary tables are
converted to int32 / float32 C-contiguous copies when they are not already (the ALiBi slopes and
the attention sinks' logits too).
"""

from typing import Optional, Tuple

import numpy as np

from . import _core
from ._numpy import _array

__all__ = ["attention_combine", "attention_with_kvcache", "kvcache_append"]


def _int32(name: str, x) -> Optional[np.ndarray]:
    if x is None:
        return None
    a = np.asarray(x)
    if a.dtype.kind not in "iu":
        raise TypeError(f"flashlab: {name} must hold integers (int32), not {a.dtype}")
    return np.ascontiguousarray(a, dtype=np.int32)


def _float32(x) -> Optional[np.ndarray]:
    return None if x is None else np.ascontiguousarray(x, dtype=np.float32)


def _tables(cos, sin):
    """The rotary tables: both float16 stay float16 (read as their exact fp32 values), else float32."""
    if cos is not None and sin is not None and np.asarray(cos).dtype == np.float16 == np.asarray(sin).dtype:
        return np.ascontiguousarray(cos), np.ascontiguousarray(sin)
    return _float32(cos), _float32(sin)


def _seqlens(cache_seqlens, batch: int) -> np.ndarray:
    if np.isscalar(cache_seqlens):
        return np.full((batch,), int(cache_seqlens), dtype=np.int32)
    return _int32("cache_seqlens", cache_seqlens)


def _cache_options(rotary_cos, rotary_sin, rotary_interleaved, cache_batch_idx, cache_leftpad, block_table,
                   page_layout):  # fmt: skip
    rotary_cos, rotary_sin = _tables(rotary_cos, rotary_sin)
    return dict(
        rotary_cos=rotary_cos, rotary_sin=rotary_sin,
        rotary_interleaved=rotary_interleaved, cache_batch_idx=_int32("cache_batch_idx", cache_batch_idx),
        cache_leftpad=_int32("cache_leftpad", cache_leftpad), block_table=_int32("block_table", block_table),
        page_layout=page_layout,
    )  # fmt: skip


def attention_with_kvcache(
    q: np.ndarray,
    k_cache: np.ndarray,
    v_cache: np.ndarray,
    cache_seqlens,
    *,
    k: Optional[np.ndarray] = None,
    v: Optional[np.ndarray] = None,
    rotary_cos: Optional[np.ndarray] = None,
    rotary_sin: Optional[np.ndarray] = None,
    rotary_interleaved: bool = False,
    cache_batch_idx: Optional[np.ndarray] = None,
    cache_leftpad: Optional[np.ndarray] = None,
    block_table: Optional[np.ndarray] = None,
    page_layout: str = "NHD",
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    window_size: Tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Optional[np.ndarray] = None,
    num_splits: int = 0,
    split_size: int = 0,
    return_lse: bool = True,
    impl: str = "auto",
    num_threads: int = 0,
    sink_logits: Optional[np.ndarray] = None,
    check_device_data: bool = False,
    sink_tokens: int = 0,
) -> Tuple[np.ndarray, Optional[np.ndarray]]:
    """Attention of ``q`` against a K/V cache, appending new keys/values first; returns ``(out, lse)``.

    Semantics: docs/kvcache.md. Shapes:

    * ``q``: (batch, seqlen_q, heads_q, head_dim); ``out`` has its shape and dtype; ``lse`` is
      float32 (batch, heads_q, seqlen_q), or ``None`` with ``return_lse=False``.
    * contiguous cache (no ``block_table``): ``k_cache``/``v_cache`` (batch_cache, max_seqlen_cache,
      heads_kv, head_dim); sequence b uses row ``cache_batch_idx[b]`` (int32 (batch,); default b).
    * paged cache: ``block_table`` int32 (batch, max_pages) of page indices; ``k_cache``/``v_cache``
      are pages, ``page_layout="NHD"`` (num_pages, page_size, heads_kv, head_dim) (flash-attn's) or
      ``"HND"`` (num_pages, heads_kv, page_size, head_dim); any page_size >= 1. Slot s of sequence b
      is slot s % page_size of page block_table[b, s // page_size].
    * ``cache_seqlens``: int32 (batch,) (or an int for all): filled slots before the append.
    * ``k``/``v`` (optional, together): (batch, seqlen_new, heads_kv, head_dim), written **in place**
      into the caches at slots cache_seqlens[b] .. + seqlen_new - 1 (k after rotary). The caller's
      ``cache_seqlens`` is not updated.
    * ``cache_leftpad``: int32 (batch,): slots [0, leftpad) are not keys. The keys of sequence b are
      slots [leftpad, cache_seqlens + seqlen_new), L_b of them; key j has position j and query i
      position L_b - seqlen_q + i (used by ``causal`` (bottom-right), ``window_size``, ALiBi and rotary).
    * ``rotary_cos``/``rotary_sin``: float32 or float16 (rotary_max_pos, rotary_dim / 2; a float16
      table is read as its exact values, other types become float32); rotary_dim is taken
      from their shape. Applied to the new keys and to the queries at their positions;
      ``rotary_interleaved`` True = GPT-J pairs (2i, 2i+1), False = NeoX/Llama (i, i + rotary_dim/2).
    * ``alibi_slopes``: float32 (heads_q,) or (batch, heads_q). ``softcap`` > 0: tanh capping.
    * ``sink_tokens``: StreamingLLM sink tokens (docs/kvcache.md, "Mask and scores"): the first
      ``sink_tokens`` keys (from slot ``leftpad`` on) stay visible left of the window, never right of
      a query's causal bound; 0 = off. CPU only for now (CUDA raises ``UnsupportedError``).
    * ``split_size`` > 0: split-KV in splits of that many keys (batch-invariant); else
      ``num_splits`` (0 auto, 1 none, n splits). The result equals no split up to rounding.
    * ``sink_logits``: float32 (heads_q,) attention sinks (docs/kvcache.md, "Attention sinks"): one
      logit per query head in every row's softmax denominator, with no value:
      lse = log(exp(sink_h) + Σ_j exp(s_j)), out = Σ_j exp(s_j - lse) v_j. A row that sees no key
      gets out 0 and lse = sink_h; a sink of -inf is no sink (NaN or +inf are refused). Every split
      setting gives the same math (the sink is merged after the splits). Forward only.
    * ``check_device_data``: validate the int32 side arrays (``cache_seqlens``, ``cache_leftpad``,
      ``cache_batch_idx``, ``block_table``) on the host before anything runs. It matters on CUDA
      only (docs/kvcache.md, "Validation"): NumPy arrays are host memory, which the library always
      checks entry by entry (bad entries raise :class:`flashlab.FlashlabError`, nothing written),
      so here it changes nothing; it is accepted like ``flashlab.torch.attention_with_kvcache``'s.

    Errors raise :class:`flashlab.FlashlabError` (a ValueError) naming the argument; nothing,
    the cache included, is written then. CPU: ``impl="auto"`` runs ``cpu_flash``, ``"reference"``
    the float64 reference; fp32 and fp16 in NumPy.
    """
    q, k_cache, v_cache = (_array(n, x) for n, x in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)))
    if k is not None:
        k = _array("k", k)
    if v is not None:
        v = _array("v", v)
    out = np.empty(q.shape, dtype=q.dtype)
    lse = np.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=np.float32) if return_lse else None
    _core.attention_with_kvcache(
        q, k_cache, v_cache, _seqlens(cache_seqlens, q.shape[0]), out, lse, k=k, v=v,
        **_cache_options(rotary_cos, rotary_sin, rotary_interleaved, cache_batch_idx, cache_leftpad,
                         block_table, page_layout),
        softmax_scale=softmax_scale, causal=causal, window_left=window_size[0], window_right=window_size[1],
        sink_tokens=sink_tokens, softcap=softcap, alibi_slopes=_float32(alibi_slopes), sink_logits=_float32(sink_logits),
        num_splits=num_splits, split_size=split_size, check_device_data=check_device_data, impl=impl,
        num_threads=num_threads,
    )  # fmt: skip
    return out, lse


def kvcache_append(
    k_cache: np.ndarray,
    v_cache: np.ndarray,
    cache_seqlens,
    k: np.ndarray,
    v: np.ndarray,
    *,
    rotary_cos: Optional[np.ndarray] = None,
    rotary_sin: Optional[np.ndarray] = None,
    rotary_interleaved: bool = False,
    cache_batch_idx: Optional[np.ndarray] = None,
    cache_leftpad: Optional[np.ndarray] = None,
    block_table: Optional[np.ndarray] = None,
    page_layout: str = "NHD",
) -> None:
    """The append step of :func:`attention_with_kvcache` alone: ``k`` (rotated at positions
    cache_seqlens[b] - leftpad[b] + t when rotary tables are given) and ``v`` are written in place
    into the caches; same shapes and options as there. Returns nothing."""
    k_cache, v_cache, k, v = (_array(n, x) for n, x in
                              (("k_cache", k_cache), ("v_cache", v_cache), ("k", k), ("v", v)))  # fmt: skip
    _core.kvcache_append(
        k_cache, v_cache, _seqlens(cache_seqlens, k.shape[0]), k, v,
        **_cache_options(rotary_cos, rotary_sin, rotary_interleaved, cache_batch_idx, cache_leftpad,
                         block_table, page_layout),
    )  # fmt: skip


def attention_combine(
    out_partial: np.ndarray, lse_partial: np.ndarray, out_dtype=None, *, num_threads: int = 0
) -> Tuple[np.ndarray, np.ndarray]:
    """Merges split-KV partial results exactly; returns ``(out, lse)``.

    ``out_partial``: float32 (num_splits, batch, seqlen_q, heads, head_dim); ``lse_partial``: float32
    (num_splits, batch, heads, seqlen_q). With m = max_s lse_s and w_s = exp(lse_s - m):
    lse = m + log Σ w_s and out = Σ w_s O_s / Σ w_s; splits with lse = -inf contribute nothing,
    and a row whose splits are all -inf gets out 0, lse -inf (docs/kvcache.md, "Split-KV").
    ``out``: (batch, seqlen_q, heads, head_dim) in ``out_dtype`` (default float32); ``lse``: float32
    (batch, heads, seqlen_q).
    """
    out_partial, lse_partial = _array("out_partial", out_partial), _array("lse_partial", lse_partial)
    if out_partial.ndim != 5:
        raise _core.FlashlabError(f"out_partial.shape {out_partial.shape} must be "
                         "(num_splits, batch, seqlen_q, heads, head_dim)")  # fmt: skip
    out = np.empty(out_partial.shape[1:], dtype=np.float32 if out_dtype is None else out_dtype)
    lse = np.empty((out_partial.shape[1], out_partial.shape[3], out_partial.shape[2]), dtype=np.float32)
    _core.attention_combine(out_partial, lse_partial, out, lse, num_threads=num_threads)
    return out, lse
