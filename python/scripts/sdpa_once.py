"""A few SDPA calls at one shape, for a profiler to catch a peer's kernel (tools/gpu_sm90.sh fwd-profile).

    ncu -k 'regex:cudnn' -c 1 --launch-skip 1 python python/scripts/sdpa_once.py \\
        --batch 32 --heads 16 --seqlen 512 --head-dim 128 --causal [--backend cudnn|flash]

bf16, (batch, heads, seqlen, head_dim) inputs, three forward calls.
"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--seqlen", type=int, default=512)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--backend", choices=("cudnn", "flash"), default="cudnn")
    a = ap.parse_args()
    backend = SDPBackend.CUDNN_ATTENTION if a.backend == "cudnn" else SDPBackend.FLASH_ATTENTION
    q, k, v = (torch.randn(a.batch, a.heads, a.seqlen, a.head_dim, device="cuda", dtype=torch.bfloat16)
               for _ in range(3))
    with sdpa_kernel(backend):
        for _ in range(3):
            F.scaled_dot_product_attention(q, k, v, is_causal=a.causal)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
