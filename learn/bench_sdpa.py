#!/usr/bin/env python3
"""learn/bench_sdpa.py — the peer for the learning path: PyTorch SDPA, flash backend, fwd and bwd.

Times torch.nn.functional.scaled_dot_product_attention restricted to SDPBackend.FLASH_ATTENTION on
the learning path's standard shape (bf16, hdim 128, 16 heads, batch * seqlen = 16k tokens) with
the same method as learn/harness.cuh: CUDA events around each rep, L2 flushed before each rep,
warm-up first, median reported; TFLOP/s from the same mask-aware count as flashlab::attention_flops
(forward 4 * d per visible (query, key) pair and head, backward 2.5x that).

Stand-alone by design: learn/run_gpu.sh runs it on the GPU machine beside the C++ harness, where
torch is installed but flashlab's Python extension is not built. So it keeps flops_forward, a
closed form for the only shapes it times (seqlen_q = seqlen_k, full or causal); the test
python/tests/test_core.py::test_bench_sdpa_flops_match_the_library pins it to flashlab.attention_flops.

Tensors use flashlab's (batch, seqlen, heads, head_dim) layout, passed to SDPA as a transposed
view, so both sides read the same memory layout. seqlen_q == seqlen_k, so SDPA's top-left causal
mask equals flashlab's bottom-right one.

  python3 learn/bench_sdpa.py [--seqlens 2048,4096,8192,16384] [--causal both|0|1] [--hdim 128]
                              [--heads 16] [--tokens 16384] [--dtype bf16|fp16] [--peak 798]
"""
import argparse
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def flops_forward(batch, heads, seqlen, hdim, causal):
    """flashlab::attention_flops at seqlen_q = seqlen_k (either causal alignment): see the docstring."""
    pairs = seqlen * (seqlen + 1) // 2 if causal else seqlen * seqlen
    return 4.0 * hdim * pairs * heads * batch


def time_ms(fn, warmup=3, min_reps=5, max_reps=50, budget_ms=1500.0):
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times, reps = [], max_reps
    r = 0
    while r < reps:
        flush.zero_()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
        if r == 0:
            reps = max(min_reps, min(max_reps, int(budget_ms / max(times[0], 1e-3))))
        r += 1
    return statistics.median(times), len(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqlens", default="2048,4096,8192,16384")
    ap.add_argument("--causal", default="both")
    ap.add_argument("--hdim", type=int, default=128)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--peak", type=float, default=0.0, help="bf16 peak TFLOP/s for the %% column")
    ap.add_argument("--no-backward", action="store_true")
    args = ap.parse_args()

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    causals = {"both": [False, True], "0": [False], "1": [True]}[args.causal]
    seqlens = [int(s) for s in args.seqlens.split(",")]
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}; SDPA flash backend; "
          f"{args.dtype} hdim {args.hdim}, {args.heads} heads, {args.tokens} tokens; median ms, L2 flushed")
    print(f"  {'pass':<4} {'seqlen':<7} {'causal':<6} {'ms':>10} {'TFLOP/s':>9} {'%peak':>7} {'reps':>5}")
    rows = []
    gen = torch.Generator(device="cuda").manual_seed(1234)
    for causal in causals:
        for s in seqlens:
            b = max(1, args.tokens // s)
            shape = (b, s, args.heads, args.hdim)
            q, k, v, do = (torch.randn(shape, device="cuda", dtype=dtype, generator=gen) for _ in range(4))
            q, k, v = (x.requires_grad_() for x in (q, k, v))
            qt, kt, vt, dot = (x.transpose(1, 2) for x in (q, k, v, do))  # (b, h, s, d) views
            fl = flops_forward(b, args.heads, s, args.hdim, causal)
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                def fwd():
                    with torch.no_grad():
                        return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                ms, reps = time_ms(fwd)
                rows.append(("fwd", s, causal, ms, fl / ms / 1e9, reps))
                if not args.no_backward:
                    out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                    def bwd():
                        torch.autograd.grad(out, (q, k, v), dot, retain_graph=True)
                    ms, reps = time_ms(bwd)
                    rows.append(("bwd", s, causal, ms, 2.5 * fl / ms / 1e9, reps))
                    del out
            for r in rows[-(1 if args.no_backward else 2):]:
                pct = 100.0 * r[4] / args.peak if args.peak > 0 else 0.0
                print(f"  {r[0]:<4} {r[1]:<7} {int(r[2]):<6} {r[3]:>10.3f} {r[4]:>9.1f} {pct:>6.1f}% {r[5]:>5}")
            sys.stdout.flush()
            del q, k, v, do, qt, kt, vt, dot
            torch.cuda.empty_cache()
    print("csv,peer,pass,seqlen,causal,ms,tflops")
    for r in rows:
        print(f"csv,sdpa_flash,{r[0]},{r[1]},{int(r[2])},{r[3]:.4f},{r[4]:.2f}")


if __name__ == "__main__":
    main()
