"""Shared plumbing of the Triton kernels: argument checks, constants, tile configurations.

Nothing here is a kernel. fa1.py and fa2.py hold the kernels; this file holds what both need so that
the kernel files stay about the algorithm.

Layout contract (the same as flashlab's C++ API and flash_attn):
    q       (batch, seqlen_q, heads_q,  head_dim)   any strides
    k, v    (batch, seqlen_k, heads_kv, head_dim)   any strides, heads_q % heads_kv == 0
    out     (batch, seqlen_q, heads_q,  head_dim)   allocated contiguous, dtype of q
    lse     (batch, heads_q, seqlen_q)              float32, natural log; -inf for a row with no key
Causal masks are bottom-right aligned: query i sees key j iff j <= i + (seqlen_k - seqlen_q).
"""
import math
import os
from dataclasses import dataclass

import torch

# Softmax in base 2: exp(x) = exp2(x * LOG2E). The kernels fold LOG2E into the softmax scale so that
# each score costs one multiply and one exp2 (a single MUFU.EX2 instruction on NVIDIA GPUs).
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453

SUPPORTED_HEAD_DIMS = (16, 32, 64, 128, 256)  # powers of two: tl.arange needs one
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class TileConfig:
    """One kernel launch's tile sizes. block_m: query rows per tile, block_n: keys per tile."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int

    def __str__(self):
        return f"m{self.block_m}n{self.block_n}w{self.num_warps}s{self.num_stages}"


def interpreting():
    """True under TRITON_INTERPRET=1 (Triton runs the kernels on the CPU with numpy: slow, exact
    enough to test the indexing and the masks without a GPU)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def check_inputs(q, k, v, softmax_scale):
    """Validate q, k, v; return (batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, scale).

    Errors name the argument and the rule (ValueError / TypeError), never an assert."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{name} must be 4-D (batch, seqlen, heads, head_dim), got shape {tuple(t.shape)}")
        if t.dtype not in SUPPORTED_DTYPES:
            raise TypeError(f"{name}.dtype = {t.dtype} is not supported: float16 or bfloat16")
        if not (t.is_cuda or interpreting()):
            raise ValueError(f"{name} is on {t.device}: the Triton kernels need a CUDA tensor")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")
    batch, seqlen_q, heads_q, head_dim = q.shape
    if k.shape != v.shape:
        raise ValueError(f"k.shape {tuple(k.shape)} and v.shape {tuple(v.shape)} must be equal")
    if k.shape[0] != batch or k.shape[3] != head_dim:
        raise ValueError(f"k.shape {tuple(k.shape)} must be (batch={batch}, seqlen_k, heads_kv, head_dim={head_dim})")
    seqlen_k, heads_kv = k.shape[1], k.shape[2]
    if heads_kv == 0 or heads_q % heads_kv != 0:
        raise ValueError(f"q.shape[2] (heads_q) = {heads_q} must be a multiple of k.shape[2] (heads_kv) = {heads_kv}")
    if head_dim not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"q.shape[3] (head_dim) = {head_dim} is not supported by flashlab.triton: "
                         f"supported {', '.join(map(str, SUPPORTED_HEAD_DIMS))}")
    if softmax_scale is None:
        softmax_scale = 1.0 / math.sqrt(head_dim)
    softmax_scale = float(softmax_scale)
    if not math.isfinite(softmax_scale):
        raise ValueError(f"softmax_scale = {softmax_scale} must be finite")
    return batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, softmax_scale


def strides4(t):
    """The four strides of a (batch, seqlen, heads, head_dim) tensor, in that order."""
    return t.stride(0), t.stride(1), t.stride(2), t.stride(3)

