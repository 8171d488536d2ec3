"""What the Python layer costs: host time per call, and device time beside PyTorch SDPA.

    python python/scripts/measure_overhead.py         # needs torch, a GPU and a CUDA build of flashlab

1. Host overhead: wall time of one eager call on a tiny problem (the GPU work is negligible, so
   this is argument parsing, DLPack export, validation and launch), flashlab.torch vs SDPA, and
   the same call replayed from a CUDA graph (what training loops that capture graphs pay).
2. Device time on a standard shape (bf16, batch 4, seqlen 4096, 16 heads, head_dim 128), median
   of CUDA-event timings of 10 back-to-back calls: flashlab.torch (learn_v4 through the custom ops) vs SDPA's flash
   backend, forward and forward+backward. The flashlab number includes the binding; compare with
   docs/learn/perf-*.md (the C++ harness) to see that the binding adds nothing measurable there.
"""

import statistics
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashlab.torch as fl


def host_us_per_call(fn, iters=2000):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    t1 = time.perf_counter()  # host time to issue `iters` calls (tiny kernels: launch-bound)
    torch.cuda.synchronize()
    return (t1 - t0) / iters * 1e6


def graph_us_per_call(fn, iters=2000):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return host_us_per_call(g.replay, iters)


def device_ms(fn, reps=30, calls=10):
    """Median over `reps` of the event time of `calls` back-to-back calls, per call. Back to back,
    so that the host's launch latency (~0.1 ms here) overlaps the previous call's GPU work instead
    of showing up as an idle gap after the start event."""
    for _ in range(5):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


def main():
    dev = torch.cuda.get_device_name()
    print(f"device: {dev}, torch {torch.__version__}")
    tiny = [torch.randn(1, 128, 1, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
    tiny_t = [x.transpose(1, 2) for x in tiny]  # SDPA's (batch, heads, seqlen, dim) view

    def sdpa_tiny():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(*tiny_t, is_causal=True)

    rows = [
        ("flashlab.torch.attention, eager", host_us_per_call(lambda: fl.attention(*tiny, causal=True))),
        ("SDPA flash, eager", host_us_per_call(sdpa_tiny)),
        ("flashlab.torch.attention, CUDA graph replay", graph_us_per_call(lambda: fl.attention(*tiny, causal=True))),
        ("SDPA flash, CUDA graph replay", graph_us_per_call(sdpa_tiny)),
    ]
    print("\n| host time per call (1x128x1x64 bf16, causal) | us |\n|---|---:|")
    for name, us in rows:
        print(f"| {name} | {us:.1f} |")

    b, s, h, d = 4, 4096, 16, 128
    q, k, v, dout = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))
    qt, kt, vt = (x.detach().transpose(1, 2).requires_grad_() for x in (q, k, v))
    dout_t = dout.transpose(1, 2)

    def fl_fwd():
        return fl.attention(q, k, v, causal=True)

    def fl_fwd_bwd():
        torch.autograd.grad(fl.attention(qg, kg, vg, causal=True), (qg, kg, vg), dout)

    def sdpa_fwd():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(qt.detach(), kt.detach(), vt.detach(), is_causal=True)

    def sdpa_fwd_bwd():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
        torch.autograd.grad(out, (qt, kt, vt), dout_t)

    flops_fwd = 4 * b * h * d * s * s / 2  # causal: half of the (query, key) pairs
    print(f"\n| {b}x{s}x{h}x{d} bf16 causal | ms | TFLOP/s | vs SDPA flash |\n|---|---:|---:|---:|")
    for label, mine, peer, flops in (("forward", fl_fwd, sdpa_fwd, flops_fwd),
                                     ("forward+backward", fl_fwd_bwd, sdpa_fwd_bwd, 3.5 * flops_fwd)):  # fmt: skip
        ms_fl, ms_sdpa = device_ms(mine), device_ms(peer)
        print(f"| flashlab.torch {label} | {ms_fl:.3f} | {flops / ms_fl / 1e9:.0f} | {ms_sdpa / ms_fl:.2f}x |")
        print(f"| SDPA flash {label} | {ms_sdpa:.3f} | {flops / ms_sdpa / 1e9:.0f} | 1.00x |")


if __name__ == "__main__":
    main()
