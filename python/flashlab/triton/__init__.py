"""flashlab.triton — FlashAttention-1 and FlashAttention-2 written in Triton, for learning.

    from flashlab.triton import fa2_attention
    out = fa2_attention(q, k, v, causal=True)                   # q: (batch, seqlen_q, heads_q, head_dim)
    out, lse = fa2_attention(q, k, v, return_lse=True)          # lse: (batch, heads_q, seqlen_q), float32

Both functions are differentiable (torch.autograd.Function); lse is returned without a gradient.
Supported: float16/bfloat16 on CUDA, head_dim 16/32/64/128/256, any seqlen_q and seqlen_k, GQA/MQA
(heads_q a multiple of heads_kv), causal masks aligned bottom-right (query i sees key j iff
j <= i + seqlen_k - seqlen_q; a row that sees no key gives 0 and LSE -inf), any input strides.
Not supported (use flashlab.torch or flash_attn): dropout, softcap, ALiBi, sliding windows, varlen.

The kernels are in fa2.py (the fast one: read it first) and fa1.py (the paper's Algorithm 1 and 2
structure, slow on purpose). fa2_tma.py is the Hopper step: fa2.py's forward with its tiles moved by
TMA (tensor descriptors; the head dim contiguous and the other strides multiples of 16 bytes), and
fa2.py's backward. docs/learn/triton.md compares them with the CUDA learning kernels.
"""
import torch

from .fa1 import fa1_backward, fa1_forward
from .fa2 import fa2_backward, fa2_forward
from .fa2_tma import fa2_tma_backward, fa2_tma_forward

__all__ = ["fa1_attention", "fa2_attention", "fa2_tma_attention", "fa1_forward", "fa1_backward", "fa2_forward",
           "fa2_backward", "fa2_tma_forward", "fa2_tma_backward"]


def _make_function(name, forward, backward):
    """One autograd.Function per algorithm; the two differ only in the kernels they call."""

    def fwd(ctx, q, k, v, causal, softmax_scale):
        out, lse = forward(q, k, v, causal, softmax_scale)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal, ctx.softmax_scale = causal, softmax_scale
        ctx.mark_non_differentiable(lse)
        return out, lse

    def bwd(ctx, dout, _dlse):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = backward(dout, q, k, v, out, lse, ctx.causal, ctx.softmax_scale)
        return dq, dk, dv, None, None

    return type(name, (torch.autograd.Function,), {"forward": staticmethod(fwd), "backward": staticmethod(bwd)})


_FA1 = _make_function("FA1Attention", fa1_forward, fa1_backward)
_FA2 = _make_function("FA2Attention", fa2_forward, fa2_backward)
_FA2_TMA = _make_function("FA2TMAAttention", fa2_tma_forward, fa2_tma_backward)


def fa1_attention(q, k, v, causal=False, softmax_scale=None, return_lse=False):
    """FlashAttention-1 (outer loop over K/V blocks; O, l, m round-trip through device memory).

    softmax_scale defaults to 1/sqrt(head_dim). Returns out, or (out, lse) with return_lse=True."""
    out, lse = _FA1.apply(q, k, v, bool(causal), softmax_scale)
    return (out, lse) if return_lse else out


def fa2_attention(q, k, v, causal=False, softmax_scale=None, return_lse=False):
    """FlashAttention-2 (one program per query block, online softmax in registers).

    softmax_scale defaults to 1/sqrt(head_dim). Returns out, or (out, lse) with return_lse=True."""
    out, lse = _FA2.apply(q, k, v, bool(causal), softmax_scale)
    return (out, lse) if return_lse else out


def fa2_tma_attention(q, k, v, causal=False, softmax_scale=None, return_lse=False):
    """FlashAttention-2 with the forward's tiles moved by TMA (Hopper's tensor memory accelerator;
    fa2_tma.py) and fa2's backward. ValueError where TMA cannot describe q, k or v (head dim not
    contiguous, another stride or the address not a multiple of 16 bytes).

    softmax_scale defaults to 1/sqrt(head_dim). Returns out, or (out, lse) with return_lse=True."""
    out, lse = _FA2_TMA.apply(q, k, v, bool(causal), softmax_scale)
    return (out, lse) if return_lse else out
