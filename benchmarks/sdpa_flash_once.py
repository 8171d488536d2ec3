#!/usr/bin/env python3
"""benchmarks/sdpa_flash_once.py — one forward and one backward of PyTorch SDPA's flash backend
(FlashAttention-2; --backend cudnn: its cuDNN one; --backend fa4: FlashAttention-4's
flash_attn.cute.flash_attn_func, where ../shared/tools/prepare_fa4_peer.sh put it on the path), for
profilers: `ncu ... python3 benchmarks/sdpa_flash_once.py` gives the peer's kernels at the shape
tools/gpu_check.sh's `profile` phase runs flashlab's (bf16, b4 s4096 h16 d128); tools/gpu_sm90.sh
fwd-profile uses cuDNN's, peer-bwd-profile (PEER=fa4) FA4's backward.

  python3 benchmarks/sdpa_flash_once.py [--batch 4] [--seqlen 4096] [--heads 16] [--head-dim 128] [--causal]
                                        [--backend flash|cudnn|fa4]
"""
import argparse
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

ap = argparse.ArgumentParser()
ap.add_argument("--batch", type=int, default=4)
ap.add_argument("--seqlen", type=int, default=4096)
ap.add_argument("--heads", type=int, default=16)
ap.add_argument("--head-dim", type=int, default=128)
ap.add_argument("--causal", action="store_true")
ap.add_argument("--backend", choices=("flash", "cudnn", "fa4"), default="flash")
a = ap.parse_args()
if a.backend == "fa4":  # its own API: (batch, seqlen, heads, dim)
    from flash_attn.cute import flash_attn_func

    name, context, shape = "fa4", nullcontext(), (a.batch, a.seqlen, a.heads, a.head_dim)

    def attend(q, k, v):
        out = flash_attn_func(q, k, v, causal=a.causal)
        return out[0] if isinstance(out, tuple) else out
else:
    backend = SDPBackend.FLASH_ATTENTION if a.backend == "flash" else SDPBackend.CUDNN_ATTENTION
    name, context, shape = f"sdpa {a.backend}", sdpa_kernel(backend), (a.batch, a.heads, a.seqlen, a.head_dim)

    def attend(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=a.causal)


q, k, v, do = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(4))
q, k, v = (x.requires_grad_() for x in (q, k, v))
with context:
    out = attend(q, k, v)
    torch.autograd.grad(out, (q, k, v), do)
torch.cuda.synchronize()
print(f"{name}: one forward + backward done", tuple(shape), "causal" if a.causal else "")
