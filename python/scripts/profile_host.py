"""Where the host time of a flashlab.torch call goes (the backward's in detail), on a GPU (tools/gpu_sm90.sh host-profile).

    python python/scripts/profile_host.py            # needs torch, a GPU and a CUDA build of flashlab

At short sequences the backward's host time can exceed its GPU time, and then an eager call (what
`python -m flashlab.bench` times, one call after an L2 flush) waits on the host. Prints, for
flashlab.torch beside SDPA (cuDNN and flash backends):
0. per forward call at the grid's short points (inputs requiring grad, as the bench): host,
   device, kernel (torch.profiler) and flushed time;
1. per backward call (torch.autograd.grad of the output): host time (perf_counter over calls
   issued back to back) and GPU time (CUDA events over the same calls), at the grid's shortest
   point (batch 32, seqlen 512, 16 heads, head_dim 128, causal) and at a tiny one (host only);
2. one flushed call the way flashlab.bench times it (a 256 MiB memset, then start event, the call,
   stop event), so the two can be compared;
3. cProfile of the forward at the shortest point and of the tiny backward: the Python functions
   by own time (the C++ call is inside flashlab.torch._call); then torch.profiler's table of the
   same calls, CUDA runtime calls (launches, memsets, allocations, synchronizations) included.
The implementations are flashlab.bench's (make_impl), so the calls are the ones the grid times.
"flashlab, no _torch_ext" is flashlab.torch with FLASHLAB_TORCH_EXT=0 (its Python autograd Function
instead of the C++ node): both in one process (docs/perf.md, session 17).
"""

import cProfile
import io
import pstats
import statistics
import time

import torch

from flashlab.bench import make_impl


def make(batch, seqlen, heads, head_dim):
    g = torch.Generator(device="cuda").manual_seed(0)
    shape = (batch, seqlen, heads, head_dim)
    q, k, v, do = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(4))
    return [t.requires_grad_() for t in (q, k, v)] + [do]


# f(q, k, v, causal) for each implementation: flashlab.bench's own, so the calls are the grid's.
IMPLS = [(name, make_impl(spec, torch)) for name, spec in
         (("flashlab", "flashlab:auto"), ("flashlab, no _torch_ext", "flashlab:auto@FLASHLAB_TORCH_EXT=0"),
          ("sdpa_cudnn", "sdpa_cudnn"), ("sdpa_flash", "sdpa_flash"))]


def causal_fn(fn):
    return lambda q, k, v: fn(q, k, v, True)


def report(name, measure):
    """One line of figures from measure() -> str, or the failure's first line."""
    try:
        print(f"    {name:12s} {measure()}")
    except Exception as e:  # noqa: BLE001
        print(f"    {name:12s} failed: {type(e).__name__}: {str(e).splitlines()[0][:100]}")


def profile_calls(fn, label, cprofile_calls, torch_calls, activities, rows):
    """cProfile (own time per Python function) and torch.profiler (self CPU time per op and CUDA
    runtime call, which cProfile folds into the C++ call) of fn's calls."""
    from torch.profiler import profile
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(cprofile_calls):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(rows)
    print(f"## cProfile, {cprofile_calls} {label} (own time per function)")
    print(s.getvalue())
    with profile(activities=activities) as tp:
        for _ in range(torch_calls):
            fn()
        torch.cuda.synchronize()
    print(f"## torch.profiler, {torch_calls} {label} (self CPU time)")
    print(tp.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows + 5, max_name_column_width=60))


def per_call(fn, q, k, v, do, calls=50, reps=5, forward=False):
    """(host us, device us, flushed us, the timed callable) per call of fn's backward, or of fn
    itself with forward=True (inputs requiring grad, as flashlab.bench times the forward)."""
    if forward:
        bwd = lambda: fn(q, k, v)  # noqa: E731
    else:
        out = fn(q, k, v)
        bwd = lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True)  # noqa: E731
    for _ in range(5):
        bwd()
    torch.cuda.synchronize()
    host, dev = [], []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t0 = time.perf_counter()
        for _ in range(calls):
            bwd()
        t1 = time.perf_counter()
        stop.record()
        stop.synchronize()
        host.append((t1 - t0) / calls * 1e6)
        dev.append(start.elapsed_time(stop) / calls * 1e3)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    flushed = []
    for _ in range(20):
        flush.zero_()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        bwd()
        stop.record()
        stop.synchronize()
        flushed.append(start.elapsed_time(stop) * 1e3)
    return statistics.median(host), statistics.median(dev), statistics.median(flushed), bwd


def kernel_us(fn, calls=20):
    """GPU kernel time per call from torch.profiler (the sum of the kernels' device time): the
    device-only figure, free of host gaps between launches."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as tp:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total = sum(e.device_time_total for e in tp.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    return total / calls


def forward_section(impls):
    """The grid's short forward points: the bench's flushed figure against host and kernel time."""
    print("## forward (inputs require grad, as flashlab.bench): per call, us -- host, device (events over "
          "back-to-back calls), kernels (torch.profiler), flushed (one call after a 256 MiB memset)")
    for b, s, h, d, causal in ((32, 512, 16, 128, True), (32, 512, 16, 128, False), (16, 1024, 16, 128, True),
                               (32, 512, 32, 64, True), (32, 512, 8, 256, False)):
        q, k, v, do = make(b, s, h, d)
        print(f"  b{b} s{s} h{h} d{d} {'causal' if causal else 'non-causal'}")
        for name, fn in impls:
            def measure(fn=fn):
                host, dev, flushed, call = per_call(lambda q, k, v: fn(q, k, v, causal), q, k, v, do, forward=True)
                return f"host {host:8.1f}   device {dev:8.1f}   kernels {kernel_us(call):8.1f}   flushed {flushed:8.1f}"
            report(name, measure)


def main():
    from torch.profiler import ProfilerActivity
    forward_section(IMPLS)
    for label, shape in (("b32 s512 h16 d128 causal", (32, 512, 16, 128)), ("tiny b1 s128 h1 d64 causal", (1, 128, 1, 64))):
        q, k, v, do = make(*shape)
        print(f"## {label}: per backward call, us (host = perf_counter over back-to-back calls; "
              f"device = CUDA events over them; flushed = one call after a 256 MiB memset, as flashlab.bench)")
        for name, fn in IMPLS:
            def measure(fn=fn):
                host, dev, flushed, _ = per_call(causal_fn(fn), q, k, v, do)
                return f"host {host:8.1f}   device {dev:8.1f}   flushed {flushed:8.1f}"
            report(name, measure)
    flashlab = causal_fn(IMPLS[0][1])
    # The forward at the grid's shortest point (what flashlab.bench times there), by function.
    q, k, v, do = make(32, 512, 16, 128)
    _, _, _, fwd = per_call(flashlab, q, k, v, do, calls=10, reps=1, forward=True)
    profile_calls(fwd, "flashlab forward calls at b32 s512 h16 d128 causal, inputs requiring grad", 200, 100,
                  [ProfilerActivity.CPU], 14)
    q, k, v, do = make(1, 128, 1, 64)
    _, _, _, bwd = per_call(flashlab, q, k, v, do, calls=10, reps=1)
    profile_calls(bwd, "tiny flashlab backward calls", 2000, 200, [ProfilerActivity.CPU, ProfilerActivity.CUDA], 20)


if __name__ == "__main__":
    main()
