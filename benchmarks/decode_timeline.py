"""benchmarks/decode_timeline.py — where a decode step's time goes inside the tile kernel, per CTA:
the fused-append benchmark's four calls (decode_fused_append.py: decode, append, append+rotary,
rotary only; B 32, GQA 32/8, hdim 128, bf16) run eagerly on a library built with the timeline
marks, and the marks' percentiles over the CTAs, in µs from the kernel's first CTA start.

Needs a timeline build: the library compiled with -DFLASHLAB_DECODE_TIMELINE (e.g.
CMAKE_CUDA_FLAGS=-DFLASHLAB_DECODE_TIMELINE; src/cuda/decode/decode_timeline.cuh lists the marks).
With an ordinary build it says so and stops. The library reads 512 MiB before each timed call, so
the L2 holds none of its data, as in decode_fused_append.py's read flush. docs/perf.md, sessions
31-33, show what the marks found (the queries' loads queued behind the tile copies; the rotation's
rounding; its code fetched cold).

usage: python benchmarks/decode_timeline.py [--cache-len 1024] [--reps 3] [--keep DIR]
"""
import argparse
import csv
import os
import sys
import tempfile

# (label, the later mark, the earlier mark or None for the kernel's first CTA start)
PHASES = [
    ("start", "t0", None),
    ("staged rows in", "t6", "t0"),
    ("Q stored (thread 0)", "t5", "t0"),
    ("prologue end", "t1", "t0"),
    ("first tile", "t2", "t0"),
    ("loop", "t3", "t2"),
    ("epilogue", "t4", "t3"),
    ("end", "t4", None),
]


def percentile(xs, q):
    xs = sorted(xs)
    i = (len(xs) - 1) * q / 100.0
    lo = int(i)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (i - lo)


def summarize(path):
    """Lines of per-phase percentiles (0/10/50/90/100) of one CSV written by the library."""
    rows = list(csv.DictReader(open(path)))
    marks = {k: [int(r[k]) for r in rows] for k in rows[0] if k.startswith("t")}
    t_first = min(marks["t0"])
    out = [f"{len(rows)} CTAs, kernel {(max(marks['t4']) - t_first) / 1000:.2f} µs "
           f"(first CTA start to last end); percentiles 0 / 10 / 50 / 90 / 100, µs"]
    for label, later, earlier in PHASES:
        if later not in marks or (earlier and earlier not in marks) or min(marks[later]) == 0:
            continue  # a mark this call does not reach (t6: nothing staged)
        base = marks[earlier] if earlier else [t_first] * len(rows)
        vals = [(a - b) / 1000.0 for a, b in zip(marks[later], base)]
        out.append(f"  {label:20s}" + "".join(f"{percentile(vals, q):8.2f}" for q in (0, 10, 50, 90, 100)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache-len", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=3, help="timed calls per mode; the last is printed")
    ap.add_argument("--keep", help="write the CSVs here (default: a temporary folder)")
    args = ap.parse_args()
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from decode_fused_append import make_calls
    from flashlab.flash_attn_interface import flash_attn_with_kvcache

    out = args.keep or tempfile.mkdtemp()
    os.makedirs(out, exist_ok=True)
    calls = make_calls(torch, flash_attn_with_kvcache, args.cache_len)
    for name, fn in calls.items():
        for _ in range(3):  # warm-up: compilation, allocator, the library's lazy setup
            fn()
        torch.cuda.synchronize()
        path = None
        for rep in range(args.reps):
            path = os.path.join(out, f"tl_{args.cache_len}_{name.replace('+', '_').replace(' ', '_')}_{rep}.csv")
            os.environ["FLASHLAB_DECODE_TL"] = path
            try:
                fn()
                torch.cuda.synchronize()
            finally:
                del os.environ["FLASHLAB_DECODE_TL"]
        if not os.path.exists(path):
            sys.exit("no timeline written: the library was not built with -DFLASHLAB_DECODE_TIMELINE "
                     "(src/cuda/decode/decode_timeline.cuh)")
        print(f"== {name}, L {args.cache_len}: " + "\n".join(summarize(path)), flush=True)


if __name__ == "__main__":
    main()
