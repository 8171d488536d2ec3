#!/usr/bin/env python3
"""benchmarks/sdpa_flash_once.py — one forward and one backward of PyTorch SDPA's flash backend
(FlashAttention-2; --backend cudnn: its cuDNN one), for profilers: `ncu ... python3
benchmarks/sdpa_flash_once.py` gives the peer's kernels at the shape tools/gpu_check.sh's `profile`
phase runs flashlab's (bf16, b4 s4096 h16 d128); tools/gpu_sm90.sh fwd-profile uses cuDNN's.

  python3 benchmarks/sdpa_flash_once.py [--batch 4] [--seqlen 4096] [--heads 16] [--head-dim 128] [--causal]
                                        [--backend flash|cudnn]
"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

ap = argparse.ArgumentParser()
ap.add_argument("--batch", type=int, default=4)
ap.add_argument("--seqlen", type=int, default=4096)
ap.add_argument("--heads", type=int, default=16)
ap.add_argument("--head-dim", type=int, default=128)
ap.add_argument("--causal", action="store_true")
ap.add_argument("--backend", choices=("flash", "cudnn"), default="flash")
a = ap.parse_args()
backend = SDPBackend.FLASH_ATTENTION if a.backend == "flash" else SDPBackend.CUDNN_ATTENTION
shape = (a.batch, a.heads, a.seqlen, a.head_dim)
q, k, v, do = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(4))
q, k, v = (x.requires_grad_() for x in (q, k, v))
with sdpa_kernel(backend):
    out = F.scaled_dot_product_attention(q, k, v, is_causal=a.causal)
    torch.autograd.grad(out, (q, k, v), do)
torch.cuda.synchronize()
print(f"sdpa {a.backend}: one forward + backward done", tuple(shape), "causal" if a.causal else "")
