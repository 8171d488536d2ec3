#!/usr/bin/env python3
"""tools/ab_libs.py — ON the GPU machine: the same CLI with two libflashlab.so builds, point by point.

For a refactor that must not change speed: A and B are two builds of the library (e.g. the commit
before and after), the CLI (`flashlab bench --json`) is the same binary for both (the public API
did not change), and every point of the grid is timed A, B, A, B, ... (REPS rounds, interleaved, so
clock and thermal drift hit both alike). Own milliseconds only: no peer is needed to compare a
build with itself.

  python3 tools/ab_libs.py --flashlab build-carry/bin/flashlab --lib-a /tmp/libA --lib-b build-carry/lib \\
      [--impl cuda_sm90] [--forward-only] [--hdims 64,128,256] [--seqlens 512,...,16384] [--reps 2] [--iters 10] [--md out.md]
  python3 tools/ab_libs.py --lib-a /tmp/libA --lib-b /tmp/libB --decode 128:1024:0,128:4096:16 [--iters 100]

--decode D:L:P,...: decode points instead of the grid (`flashlab bench --decode`, B 32, GQA 32/8,
head dim D, cache length L, page size P, 0 = contiguous; impl cuda_sm80 unless --impl names one).

Grid as benchmarks/sdpa_grid.py (bf16, batch = 16384/seqlen, heads = 2048/hdim, causal and not,
forward and backward). Prints a line per point as it goes, then a markdown table: the median of
each build's per-round medians, B/A, and the largest deviation.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def bench_json(cmd, lib):
    """Run `flashlab bench ... --json` (cmd) with build `lib`'s library first on the library path."""
    env = dict(os.environ, LD_LIBRARY_PATH=lib + ":" + os.environ.get("LD_LIBRARY_PATH", ""))
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    try:
        return json.loads(r.stdout)
    except json.JSONDecodeError:
        sys.exit(f"{' '.join(cmd[1:3])} failed with {lib}: {(r.stderr or r.stdout)[-400:]}")


def run(binary, lib, b, s, h, d, causal, iters, impl="cuda_sm80", backward=True):
    cmd = [binary, "bench", "--json", "--quiet", "--no-check", "--no-sgemm", "--impl", impl, "--batch", str(b),
           "--seqlen", str(s), "--heads", str(h), "--head-dim", str(d), "--dtype", "bf16", "--iters", str(iters)]
    cmd += (["--backward"] if backward else []) + (["--causal"] if causal else [])
    doc = bench_json(cmd, lib)
    return {row["pass"]: row["ms_median"] for row in doc["rows"] if row["ms_median"] is not None}


def run_decode(binary, lib, d, L, P, iters, impl):
    cmd = [binary, "bench", "--decode", "--json", "--quiet", "--no-check", "--impl", impl, "--batch", "32",
           "--heads", "32", "--heads-kv", "8", "--head-dim", str(d), "--cache-len", str(L), "--page-size", str(P),
           "--warmup", "10", "--iters", str(iters)]
    doc = bench_json(cmd, lib)
    times = [row["ms_median"] for row in doc["rows"] if row["ms_median"] is not None]
    if not times:
        sys.exit(f"flashlab bench --decode timed nothing with {lib} ({impl}): {doc['rows']}")
    return times[0], doc["kv_bytes"]


def decode_main(args):
    points = [tuple(map(int, p.split(":"))) for p in args.decode.split(",")]
    impl = args.impl
    print(f"A = {args.lib_a}, B = {args.lib_b}; decode, {len(points)} points x {args.reps} rounds, "
          f"median of {args.iters} iters per run", flush=True)
    lines = ["| hdim | cache | page | A TB/s | B TB/s | B/A time |", "|---|---|---|---|---|---|"]
    ratios = []
    for n, (d, L, P) in enumerate(points, 1):
        ms = {"A": [], "B": []}
        for rep in range(args.reps):
            order = (("A", args.lib_a), ("B", args.lib_b))
            for name, lib in (order if rep % 2 == 0 else order[::-1]):
                t, kv_bytes = run_decode(args.flashlab, lib, d, L, P, args.iters, impl)
                ms[name].append(t)
        a, b = statistics.median(ms["A"]), statistics.median(ms["B"])
        ratios.append(b / a)
        tbs = lambda t: kv_bytes / (t * 1e-3) / 1e12
        print(f"[{n}/{len(points)}] d{d} L{L} page {P}: A {tbs(a):.3f} TB/s, B {tbs(b):.3f} TB/s, "
              f"B/A time {b / a:.3f}", flush=True)
        lines.append(f"| {d} | {L} | {P} | {tbs(a):.3f} | {tbs(b):.3f} | {b / a:.3f} |")
    lines.append(f"- B/A time median {statistics.median(ratios):.3f}, range {min(ratios):.3f}-{max(ratios):.3f}")
    print("\n".join(lines))
    if args.md:
        with open(args.md, "w") as f:
            f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--flashlab", default="build-carry/bin/flashlab")
    ap.add_argument("--lib-a", required=True, help="folder holding build A's libflashlab.so")
    ap.add_argument("--lib-b", required=True, help="folder holding build B's libflashlab.so")
    ap.add_argument("--hdims", default="64,128,256")
    ap.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--impl", default="cuda_sm80", help="the implementation both builds run (e.g. cuda_sm90)")
    ap.add_argument("--forward-only", action="store_true", help="time the forward alone (a forward-only change)")
    ap.add_argument("--first", type=int, default=1, help="start at this point (1-based): resume a cut-off run")
    ap.add_argument("--decode", default="", help="D:L:P,...: decode points (B 32, GQA 32/8) instead of the grid")
    ap.add_argument("--md", default="")
    args = ap.parse_args()
    if args.decode:
        return decode_main(args)
    points = [(d, s, c) for d in map(int, args.hdims.split(",")) for c in (False, True)
              for s in map(int, args.seqlens.split(","))]
    print(f"A = {args.lib_a}, B = {args.lib_b}; {len(points)} points x {args.reps} rounds, "
          f"median of {args.iters} iters per run", flush=True)
    t0 = time.time()
    rows = []
    passes = ("forward",) if args.forward_only else ("forward", "backward")
    for n, (d, s, causal) in enumerate(points, 1):
        if n < args.first:
            continue
        b, h = max(1, 16384 // s), max(1, 2048 // d)
        ms = {"A": {}, "B": {}}
        for _ in range(args.reps):
            for name, lib in (("A", args.lib_a), ("B", args.lib_b)):
                for p, v in run(args.flashlab, lib, b, s, h, d, causal, args.iters, args.impl,
                                     backward=not args.forward_only).items():
                    ms[name].setdefault(p, []).append(v)
        for p in passes:
            a, bb = statistics.median(ms["A"][p]), statistics.median(ms["B"][p])
            rows.append((d, s, causal, p, a, bb, bb / a))
            print(f"[{n}/{len(points)} {time.time() - t0:4.0f}s] d{d} s{s} {'causal' if causal else 'full'} {p}: "
                  f"A {a:.3f} ms, B {bb:.3f} ms, B/A {bb / a:.3f}", flush=True)
    lines = ["| hdim | seqlen | causal | pass | A ms | B ms | B/A |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {d} | {s} | {int(c)} | {p} | {a:.3f} | {b:.3f} | {r:.3f} |" for d, s, c, p, a, b, r in rows]
    for p in passes:
        rs = [r for *_, pp, _, _, r in rows if pp == p]
        lines.append(f"- {p}: B/A median {statistics.median(rs):.3f}, range {min(rs):.3f}-{max(rs):.3f}, "
                     f"within ±2 % at {sum(abs(r - 1) <= 0.02 for r in rs)}/{len(rs)} points")
    print("\n".join(lines))
    if args.md:
        with open(args.md, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
