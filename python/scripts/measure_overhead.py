"""What the Python layer costs: host time per call, and device time beside PyTorch SDPA.

    python python/scripts/measure_overhead.py [--impl auto]   # needs torch, a GPU and a CUDA build of flashlab

1. Host overhead: wall time per call of a tiny problem (the GPU work is negligible, so this is
   argument parsing, DLPack export, validation and launch), flashlab.torch beside SDPA's flash
   backend in one table: eager forward (inputs without and with requires_grad), eager forward +
   backward, and the forward replayed from a CUDA graph (what loops that capture graphs pay).
2. Device time on a standard shape (bf16, batch 4, seqlen 4096, 16 heads, head_dim 128), median
   of CUDA-event timings of 10 back-to-back calls: flashlab.torch (the default impl "auto", i.e.
   cuda_sm80, through the custom ops; --impl names another) vs SDPA's flash backend, forward and
   forward+backward; TFLOP/s from flashlab.attention_flops. The flashlab number includes the
   binding; compare with `flashlab bench` (the C++ harness) to see what the binding adds there.
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashlab
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
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--impl", default="auto", help="flashlab implementation (default: auto = cuda_sm90 forward on an H100, else cuda_sm80)")
    impl = ap.parse_args().impl
    dev = torch.cuda.get_device_name()
    print(f"device: {dev}, torch {torch.__version__}, flashlab {flashlab.__version__}, impl {impl}")

    # 1. Host time: (batch 1, seqlen 128, 1 head, head_dim 64) bf16 causal.
    tiny = [torch.randn(1, 128, 1, 64, device="cuda", dtype=torch.bfloat16) for _ in range(4)]
    q, k, v, dout = tiny
    qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))
    qt, kt, vt, dout_t = (x.transpose(1, 2) for x in tiny)  # SDPA's (batch, heads, seqlen, dim) view
    qtg, ktg, vtg = (x.detach().transpose(1, 2).requires_grad_() for x in (q, k, v))

    def fl_call(a, b, c):
        return fl.attention(a, b, c, causal=True, impl=impl)

    def sdpa_call(a, b, c):
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(a, b, c, is_causal=True)

    cases = [  # (row, flashlab call, SDPA call, timer)
        ("eager forward", lambda: fl_call(q, k, v), lambda: sdpa_call(qt, kt, vt), host_us_per_call),
        ("eager forward, inputs require grad", lambda: fl_call(qg, kg, vg), lambda: sdpa_call(qtg, ktg, vtg),
         host_us_per_call),
        ("eager forward + backward", lambda: torch.autograd.grad(fl_call(qg, kg, vg), (qg, kg, vg), dout),
         lambda: torch.autograd.grad(sdpa_call(qtg, ktg, vtg), (qtg, ktg, vtg), dout_t), host_us_per_call),
        ("CUDA graph replay, forward", lambda: fl_call(q, k, v), lambda: sdpa_call(qt, kt, vt), graph_us_per_call),
    ]  # fmt: skip
    print("\n| host time per call, 1x128x1x64 bf16 causal | flashlab.torch us | SDPA flash us | flashlab / SDPA |")
    print("|---|---:|---:|---:|")
    for name, mine, peer, timer in cases:
        us_fl, us_sdpa = timer(mine), timer(peer)
        print(f"| {name} | {us_fl:.1f} | {us_sdpa:.1f} | {us_fl / us_sdpa:.2f}x |")

    # 2. Device time on the standard shape.
    b, s, h, d = 4, 4096, 16, 128
    q, k, v, dout = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))
    qt, kt, vt = (x.detach().transpose(1, 2).requires_grad_() for x in (q, k, v))
    dout_t = dout.transpose(1, 2)

    def fl_fwd():
        return fl_call(q, k, v)

    def fl_fwd_bwd():
        torch.autograd.grad(fl_call(qg, kg, vg), (qg, kg, vg), dout)

    def sdpa_fwd():
        return sdpa_call(qt.detach(), kt.detach(), vt.detach())

    def sdpa_fwd_bwd():
        torch.autograd.grad(sdpa_call(qt, kt, vt), (qt, kt, vt), dout_t)

    # seqlen_q = seqlen_k: SDPA's top-left causal mask is flashlab's bottom-right one.
    flops_fwd, flops_bwd = flashlab.attention_flops(b, s, s, h, h, d, causal=True)
    print(f"\n| {b}x{s}x{h}x{d} bf16 causal | ms | TFLOP/s | vs SDPA flash |\n|---|---:|---:|---:|")
    for label, mine, peer, flops in (("forward", fl_fwd, sdpa_fwd, flops_fwd),
                                     ("forward+backward", fl_fwd_bwd, sdpa_fwd_bwd, flops_fwd + flops_bwd)):  # fmt: skip
        ms_fl, ms_sdpa = device_ms(mine), device_ms(peer)
        print(f"| flashlab.torch {label} | {ms_fl:.3f} | {flops / ms_fl / 1e9:.0f} | {ms_sdpa / ms_fl:.2f}x |")
        print(f"| SDPA flash {label} | {ms_sdpa:.3f} | {flops / ms_sdpa / 1e9:.0f} | 1.00x |")


if __name__ == "__main__":
    main()
