"""benchmarks/decode_fused_append.py — what a fused append (one new token per sequence, with and
without rotary) adds to a decode step on CUDA, in CUDA-graph replays (the GPU's time alone), and
where the time goes (--timeline: the kernels' start and duration from torch.profiler).

Calls (flashlab.flash_attn_interface.flash_attn_with_kvcache; B 32, GQA 32/8, hdim 128, bf16,
contiguous cache, fp32 rotary tables, NeoX pairs):
  decode          cache_seqlens = L, no k/v
  append          k/v of one token at cache_seqlens = L - 1 (L keys attended, as in decode)
  append+rotary   the same with rotary_cos / rotary_sin
  rotary only     rotary tables, no k/v (the queries rotated at their positions)

Timing: flashlab.bench.Timer(flush="read", graph=True): each call captured once in a CUDA graph,
L2 flushed by reading 256 MiB before each replay, median of the replays that fit --budget-ms.
docs/perf.md, "Decode: the split rule, one CTA per SM; ...", session 25, has the H100 figures.

usage: python benchmarks/decode_fused_append.py [--cache-lens 1024,4096,16384] [--budget-ms 120]
                                                [--timeline]
"""
import argparse
import json
import os
import tempfile


def make_calls(torch, fa, L, B=32, H=32, Hk=8, D=128):
    dev, bf16 = "cuda", torch.bfloat16
    q = torch.randn(B, 1, H, D, device=dev, dtype=bf16)
    kc = torch.randn(B, L, Hk, D, device=dev, dtype=bf16)
    vc = torch.randn_like(kc)
    kn = torch.randn(B, 1, Hk, D, device=dev, dtype=bf16)
    vn = torch.randn_like(kn)
    full = torch.full((B,), L, dtype=torch.int32, device=dev)
    less = full - 1
    cos = torch.randn(L, D // 2, device=dev)
    sin = torch.randn_like(cos)
    return {
        "decode": lambda: fa(q, kc, vc, cache_seqlens=full),
        "append": lambda: fa(q, kc, vc, k=kn, v=vn, cache_seqlens=less),
        "append+rotary": lambda: fa(q, kc, vc, k=kn, v=vn, rotary_cos=cos, rotary_sin=sin, cache_seqlens=less),
        "rotary only": lambda: fa(q, kc, vc, rotary_cos=cos, rotary_sin=sin, cache_seqlens=full),
    }


def timeline(torch, timer, fn, reps=4):
    """(name, start µs from the first kernel, duration µs) of the last call's kernels, graph replays."""
    from torch.profiler import ProfilerActivity, profile

    graph = timer._capture(fn)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            timer._flush()
            graph.replay()
        torch.cuda.synchronize()
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(path)
    kernels = sorted((e for e in json.load(open(path))["traceEvents"] if e.get("cat") == "kernel"),
                     key=lambda e: e["ts"])  # fmt: skip
    last = [e for e in kernels if "reduce" not in e["name"]]   # drop the flush's reduction
    n = len(last) // reps
    last = last[-n:]
    t0 = last[0]["ts"]
    return [(e["name"], e["ts"] - t0, e["dur"]) for e in last]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache-lens", default="1024,4096,16384")
    ap.add_argument("--budget-ms", type=float, default=120.0)
    ap.add_argument("--timeline", action="store_true", help="also print each call's kernels (start, duration)")
    args = ap.parse_args()
    import torch

    from flashlab.bench import Timer
    from flashlab.flash_attn_interface import flash_attn_with_kvcache

    timer = Timer(torch, args.budget_ms, flush="read", graph=True)
    print("| L | decode | append | append+rotary | rotary only |")
    print("|---|---|---|---|---|")
    for L in (int(x) for x in args.cache_lens.split(",") if x):
        calls = make_calls(torch, flash_attn_with_kvcache, L)
        times = {name: timer(fn, 1000.0)[0] * 1e3 for name, fn in calls.items()}
        base = times["decode"]
        cells = [f"{times['decode']:.1f} µs"] + [f"{times[n]:.1f} (+{100 * (times[n] / base - 1):.1f} %)"
                                                 for n in ("append", "append+rotary", "rotary only")]  # fmt: skip
        print(f"| {L} | " + " | ".join(cells) + " |", flush=True)
        if args.timeline:
            for name, fn in calls.items():
                ks = timeline(torch, timer, fn)
                print(f"    {name}: " + "; ".join(f"{k[:40]} at {s:.1f} for {d:.1f} µs" for k, s, d in ks))
        del calls


if __name__ == "__main__":
    main()
