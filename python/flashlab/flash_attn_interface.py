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
* ``block_table`` (paged KV cache) is not supported.

As in flash-attn, a window side >= seqlen_k (max_seqlen_k for varlen) means unbounded.
"""

from typing import Optional, Tuple

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
from .torch import _attention  # noqa: E402

__all__ = [
    "flash_attn_func",
    "flash_attn_kvpacked_func",
    "flash_attn_qkvpacked_func",
    "flash_attn_varlen_func",
    "flash_attn_varlen_kvpacked_func",
    "flash_attn_varlen_qkvpacked_func",
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
