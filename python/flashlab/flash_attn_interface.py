"""flash-attn 2.x compatible functions on flashlab.

Switch by changing the import:

    # from flash_attn import flash_attn_func, flash_attn_varlen_func
    from flashlab.flash_attn_interface import flash_attn_func, flash_attn_varlen_func

Same names, argument names, defaults, layouts — q (batch, seqlen, nheads, headdim), packed
qkv (batch, seqlen, 3, nheads, headdim), kv (batch, seqlen, 2, nheads_k, headdim), varlen
(total, nheads, headdim) with int32 cu_seqlens — and return values: ``out``, or with
``return_attn_probs=True`` the tuple ``(out, softmax_lse, S_dmask)``. softmax_lse is fp32
(batch, nheads, seqlen_q), or (nheads, total_q) for the varlen functions.

Differences (docs/python.md lists them all):
* ``S_dmask`` is always ``None``: flashlab never materializes the probabilities.
* Dropout draws flashlab's Philox mask (docs/dropout.md), not flash-attn's: same distribution,
  different bits. The seed comes from torch's global CPU generator.
* On CUDA flashlab's kernels (``cuda_sm80``) take bf16/fp16 and head_dim any multiple of 8 up to
  256, with every feature of these functions (causal, window, softcap, ALiBi, dropout, GQA/MQA,
  varlen); anything else raises ``flashlab.UnsupportedError``. On the CPU everything runs (fp32
  too), which flash-attn does not do.
* ``flash_attn_with_kvcache`` (contiguous or paged cache, in-place append, rotary, leftpad,
  split-KV) goes through the torch op ``flashlab::kvcache_attention`` (flashlab.torch): CPU tensors
  run (the C++ ``cpu_flash``); on CUDA tensors the C++ library decides (docs/kvcache.md, "CUDA";
  what it refuses raises ``flashlab.UnsupportedError``). NumPy arrays go to
  ``flashlab.attention_with_kvcache``. flash-attn 3's keywords are keyword-only: ``page_table`` is
  ``block_table``; ``scheduler_metadata``, ``pack_gqa``, ``sm_margin`` are ignored; the rest raise
  ``UnsupportedError`` when set. Any page size works (flash-attn needs multiples of 256).
  ``flash_attn_combine`` merges split-KV partials (docs/kvcache.md).
* ``block_table`` in ``flash_attn_varlen_func`` (paged KV for prefill) is not supported.

As in flash-attn, a window side >= seqlen_k (max_seqlen_k for varlen) means unbounded.
"""

from typing import Optional, Tuple, Union

import numpy as np

try:
    import torch  # noqa: F401
except ModuleNotFoundError as _e:
    if _e.name != "torch":
        raise
    raise ImportError(
        "flashlab.flash_attn_interface needs PyTorch, which is not installed: pip install 'flashlab[torch]' "
        "(or install torch >= 2.4 itself, e.g. from https://pytorch.org for your CUDA version)",
        name="torch",
    ) from _e
from torch import Tensor  # noqa: E402

from ._core import UnsupportedError  # noqa: E402
from . import _core  # noqa: E402
from .torch import _attention  # noqa: E402
from ._torch_kvcache import attention_combine as _kvcache_combine  # noqa: E402
from ._torch_kvcache import attention_with_kvcache as _kvcache_attention  # noqa: E402

__all__ = [
    "flash_attn_combine",
    "flash_attn_func",
    "flash_attn_kvpacked_func",
    "flash_attn_qkvpacked_func",
    "flash_attn_varlen_func",
    "flash_attn_varlen_kvpacked_func",
    "flash_attn_varlen_qkvpacked_func",
    "flash_attn_with_kvcache",
]


def _run(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
         deterministic, return_attn_probs, **varlen):  # fmt: skip
    # flash-attn treats a window side reaching past every key as unbounded; so do we, which also
    # keeps such calls on kernels that support no sliding window.
    seqlen_k = varlen["max_seqlen_k"] if varlen else k.shape[1]
    window = tuple(-1 if w >= seqlen_k else w for w in window_size)
    out, lse = _attention(
        q, k, v, softmax_scale=softmax_scale, causal=causal, window=window,
        softcap=softcap, alibi_slopes=alibi_slopes, dropout_p=dropout_p,
        deterministic=deterministic, **varlen,
    )  # fmt: skip
    return (out, lse, None) if return_attn_probs else out


def flash_attn_func(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    dropout_p: float = 0.0,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    window_size: Tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Optional[Tensor] = None,
    deterministic: bool = False,
    return_attn_probs: bool = False,
):
    """q: (batch, seqlen_q, nheads, headdim); k, v: (batch, seqlen_k, nheads_k, headdim).
    Causal and window masks are aligned to the bottom right, as in flash-attn."""
    return _run(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                deterministic, return_attn_probs)  # fmt: skip


def flash_attn_qkvpacked_func(
    qkv: Tensor,
    dropout_p: float = 0.0,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    window_size: Tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Optional[Tensor] = None,
    deterministic: bool = False,
    return_attn_probs: bool = False,
):
    """qkv: (batch, seqlen, 3, nheads, headdim)."""
    q, k, v = qkv.unbind(2)
    return _run(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                deterministic, return_attn_probs)  # fmt: skip


def flash_attn_kvpacked_func(
    q: Tensor,
    kv: Tensor,
    dropout_p: float = 0.0,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    window_size: Tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Optional[Tensor] = None,
    deterministic: bool = False,
    return_attn_probs: bool = False,
):
    """q: (batch, seqlen_q, nheads, headdim); kv: (batch, seqlen_k, 2, nheads_k, headdim)."""
    k, v = kv.unbind(2)
    return _run(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                deterministic, return_attn_probs)  # fmt: skip


def flash_attn_varlen_func(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    cu_seqlens_q: Tensor,
    cu_seqlens_k: Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    dropout_p: float = 0.0,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    window_size: Tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Optional[Tensor] = None,
    deterministic: bool = False,
    return_attn_probs: bool = False,
    block_table: Optional[Tensor] = None,
):
    """q: (total_q, nheads, headdim); k, v: (total_k, nheads_k, headdim); cu_seqlens_q/k: int32
    (batch + 1,) offsets into them. Masks are aligned to each sequence's bottom right."""
    if block_table is not None:
        raise UnsupportedError("block_table (paged KV cache) is not supported by flashlab")
    return _run(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                deterministic, return_attn_probs, cu_seqlens_q=cu_seqlens_q,
                cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                max_seqlen_k=max_seqlen_k)  # fmt: skip


def flash_attn_varlen_qkvpacked_func(
    qkv: Tensor,
    cu_seqlens: Tensor,
    max_seqlen: int,
    dropout_p: float = 0.0,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    window_size: Tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Optional[Tensor] = None,
    deterministic: bool = False,
    return_attn_probs: bool = False,
):
    """qkv: (total, 3, nheads, headdim); cu_seqlens: int32 (batch + 1,)."""
    q, k, v = qkv.unbind(1)
    return _run(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                deterministic, return_attn_probs, cu_seqlens_q=cu_seqlens, cu_seqlens_k=cu_seqlens,
                max_seqlen_q=max_seqlen, max_seqlen_k=max_seqlen)  # fmt: skip


def flash_attn_varlen_kvpacked_func(
    q: Tensor,
    kv: Tensor,
    cu_seqlens_q: Tensor,
    cu_seqlens_k: Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    dropout_p: float = 0.0,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    window_size: Tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Optional[Tensor] = None,
    deterministic: bool = False,
    return_attn_probs: bool = False,
):
    """q: (total_q, nheads, headdim); kv: (total_k, 2, nheads_k, headdim)."""
    k, v = kv.unbind(1)
    return _run(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                deterministic, return_attn_probs, cu_seqlens_q=cu_seqlens_q,
                cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                max_seqlen_k=max_seqlen_k)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Inference: the K/V cache (docs/kvcache.md)
# ---------------------------------------------------------------------------------------------
def flash_attn_with_kvcache(
    q: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
    k: Optional[Tensor] = None,
    v: Optional[Tensor] = None,
    rotary_cos: Optional[Tensor] = None,
    rotary_sin: Optional[Tensor] = None,
    cache_seqlens: Optional[Union[int, Tensor]] = None,
    cache_batch_idx: Optional[Tensor] = None,
    cache_leftpad: Optional[Tensor] = None,
    block_table: Optional[Tensor] = None,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    window_size: Tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    rotary_interleaved: bool = True,
    alibi_slopes: Optional[Tensor] = None,
    num_splits: int = 0,
    return_softmax_lse: bool = False,
    *,
    page_table: Optional[Tensor] = None,
    qv: Optional[Tensor] = None,
    q_descale: Optional[Tensor] = None,
    k_descale: Optional[Tensor] = None,
    v_descale: Optional[Tensor] = None,
    cu_seqlens_q: Optional[Tensor] = None,
    cu_seqlens_k_new: Optional[Tensor] = None,
    max_seqlen_q: Optional[int] = None,
    rotary_seqlens: Optional[Tensor] = None,
    attention_chunk: int = 0,
    scheduler_metadata=None,
    pack_gqa: Optional[bool] = None,
    sm_margin: int = 0,
    sink_tokens: int = 0,
):
    """flash-attn 2.x ``flash_attn_with_kvcache``: appends ``k``/``v`` into the cache **in place**
    (at slots ``cache_seqlens[b]`` ..., ``k`` rotated first when ``rotary_cos``/``rotary_sin`` are
    given) and attends ``q`` to the cache. Returns ``out``, or ``(out, softmax_lse)`` with
    ``return_softmax_lse=True`` (softmax_lse: fp32 (batch, nheads, seqlen_q)).

    q: (batch, seqlen_q, nheads, headdim). k_cache/v_cache: (batch_cache, seqlen_cache, nheads_k,
    headdim), or with ``block_table`` (batch, max_num_blocks_per_seq) int32 the pages
    (num_blocks, page_block_size, nheads_k, headdim) (any page size >= 1). k/v: (batch, seqlen_new,
    nheads_k, headdim). cache_seqlens: int32 (batch,) or an int; ``None`` means the whole cache is
    filled. cache_batch_idx / cache_leftpad: int32 (batch,). rotary_cos/sin: (seqlen_ro,
    rotary_dim / 2). alibi_slopes: fp32 (nheads,) or (batch, nheads). num_splits: 0 auto, 1 none,
    n splits (the result is the same up to rounding).

    Positions (docs/kvcache.md): the keys are slots [leftpad, cache_seqlens + seqlen_new), key j has
    position j and query i position L - seqlen_q + i (L the number of keys); causal/window masks
    are bottom-right on these, and rotary uses them for q and the new k. flash-attn rotates every
    query of a non-causal, non-local call at position cache_seqlens; flashlab always uses the
    per-query positions (the same thing for seqlen_q = 1).

    flash-attn 3 keywords (keyword-only): ``page_table`` = ``block_table``; ``scheduler_metadata``,
    ``pack_gqa``, ``sm_margin`` are ignored; ``qv``, the descales, ``cu_seqlens_q``,
    ``cu_seqlens_k_new``, ``max_seqlen_q``, ``rotary_seqlens`` and ``attention_chunk`` raise
    ``flashlab.UnsupportedError`` when set.

    flashlab's own keyword (last, keyword-only; flash-attn has none): ``sink_tokens``, StreamingLLM
    sink tokens, the first ``sink_tokens`` keys (after ``cache_leftpad``) visible left of the window
    (docs/kvcache.md, "Mask and scores"; CPU only for now, CUDA raises ``UnsupportedError``).

    Runs ``flashlab::kvcache_attention`` (NumPy arrays: ``flashlab.attention_with_kvcache``). CPU
    tensors run (fp32, fp16, bf16); on CUDA the C++ library decides (``UnsupportedError`` for
    what it refuses). Errors raise ``flashlab.FlashlabError``; nothing (cache included) is
    written then.
    """
    if isinstance(q, np.ndarray):  # NumPy in, NumPy out: flashlab.attention_with_kvcache
        return _numpy_kvcache(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
                              cache_leftpad, block_table if page_table is None else page_table, softmax_scale,
                              causal, window_size, softcap, rotary_interleaved, alibi_slopes, num_splits,
                              return_softmax_lse, sink_tokens)  # fmt: skip
    _fa3_unsupported(qv=qv, q_descale=q_descale, k_descale=k_descale, v_descale=v_descale,
                     cu_seqlens_q=cu_seqlens_q, cu_seqlens_k_new=cu_seqlens_k_new, rotary_seqlens=rotary_seqlens,
                     max_seqlen_q=max_seqlen_q, attention_chunk=attention_chunk or None)  # fmt: skip
    if page_table is not None:
        if block_table is not None:
            raise _core.FlashlabError("give block_table (flash-attn 2) or page_table (flash-attn 3), not both")
        block_table = page_table
    if cache_seqlens is None:  # the whole cache is filled
        cache_seqlens = k_cache.shape[1] * (1 if block_table is None else block_table.shape[1])
    out, lse = _kvcache_attention(
        q, k_cache, v_cache, cache_seqlens, k=k, v=v, rotary_cos=rotary_cos, rotary_sin=rotary_sin,
        rotary_interleaved=rotary_interleaved, cache_batch_idx=cache_batch_idx, cache_leftpad=cache_leftpad,
        block_table=block_table, softmax_scale=softmax_scale, causal=causal, window_size=window_size,
        softcap=softcap, alibi_slopes=alibi_slopes, num_splits=num_splits, sink_tokens=sink_tokens,
    )  # fmt: skip
    return (out, lse) if return_softmax_lse else out


def _fa3_unsupported(**given):
    for name, value in given.items():
        if value is not None:
            raise UnsupportedError(f"flash_attn_with_kvcache: {name} (flash-attn 3) is not supported by flashlab")


def _numpy_kvcache(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx, cache_leftpad,
                   block_table, softmax_scale, causal, window_size, softcap, rotary_interleaved, alibi_slopes,
                   num_splits, return_softmax_lse, sink_tokens):  # fmt: skip
    from .kvcache import attention_with_kvcache

    if cache_seqlens is None:
        cache_seqlens = k_cache.shape[1] * (1 if block_table is None else np.shape(block_table)[1])
    out, lse = attention_with_kvcache(
        q, k_cache, v_cache, cache_seqlens, k=k, v=v, rotary_cos=rotary_cos, rotary_sin=rotary_sin,
        rotary_interleaved=rotary_interleaved, cache_batch_idx=cache_batch_idx, cache_leftpad=cache_leftpad,
        block_table=block_table, softmax_scale=softmax_scale, causal=causal, window_size=window_size,
        softcap=softcap, alibi_slopes=alibi_slopes, num_splits=num_splits, return_lse=return_softmax_lse,
        sink_tokens=sink_tokens,
    )  # fmt: skip
    return (out, lse) if return_softmax_lse else out


def flash_attn_combine(
    out_partial: Tensor, lse_partial: Tensor, out: Optional[Tensor] = None, out_dtype: Optional[torch.dtype] = None
):
    """Merges split-KV partial results exactly; returns ``(out, softmax_lse)``.

    out_partial: fp32 (num_splits, batch, seqlen_q, nheads, headdim); lse_partial: fp32
    (num_splits, batch, nheads, seqlen_q) (flashlab's layout: ``softmax_lse`` of
    ``flash_attn_with_kvcache`` stacked over the splits). ``out`` (batch, seqlen_q, nheads,
    headdim), written in place when given, else allocated in ``out_dtype`` (default: out_partial's
    dtype). softmax_lse: fp32 (batch, nheads, seqlen_q). Splits with lse -inf contribute nothing;
    a row whose splits are all -inf gets out 0 and lse -inf. Through ``flashlab::kvcache_combine``
    (NumPy arrays: ``flashlab.attention_combine``). CPU tensors (CUDA: UnsupportedError).
    """
    if isinstance(out_partial, np.ndarray):
        from .kvcache import attention_combine

        if out is not None:
            raise _core.FlashlabError("flash_attn_combine: out= needs torch tensors")
        return attention_combine(out_partial, lse_partial, out_dtype)
    return _kvcache_combine(out_partial, lse_partial, out_dtype, out=out)
