#!/usr/bin/env python3
"""benchmarks/sdpa_grid.py — flashlab's CUDA implementations vs PyTorch SDPA (flash backend) on
the production grid of issue 4, in one run on one GPU.

Grid: bf16; seqlen 512 … 16k; batch = 16384 / seqlen; heads = 2048 / hdim; hdim 64, 128, 256;
causal and not; forward and backward. For every point the peer (SDPA restricted to
SDPBackend.FLASH_ATTENTION, i.e. FlashAttention-2, timed by learn/bench_sdpa.py's method: CUDA
events, L2 flushed before each rep, median) is measured in this process, then flashlab's
implementations by the CLI (`flashlab bench --json --no-check`, same method: events, L2 flush,
median) in a subprocess — flashlab's correctness is the GPU test suite's job, not this script's.
TFLOP/s for both come from the same mask-aware count, flashlab::attention_flops (4·d per visible pair,
backward 2.5×), read from the CLI's JSON: this script needs torch and the CLI, not the Python
extension (tools/gpu_check.sh and tools/device_ab.sh run it without one).

  python3 benchmarks/sdpa_grid.py --flashlab build-carry/bin/flashlab --impl cuda_sm80 \\
      [--hdims 64,128,256] [--seqlens 512,...] [--causal both|0|1] [--no-backward] [--md out.md]

Prints one line per point as it goes (progress), then a markdown table with the ratio
flashlab / SDPA flash per pass, and the median and minimum ratio per pass.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "learn"))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from bench_sdpa import time_ms  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402


def sdpa_point(b, s, h, d, causal, backward):
    gen = torch.Generator(device="cuda").manual_seed(1234)
    shape = (b, s, h, d)
    q, k, v, do = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(4))
    q, k, v = (x.requires_grad_() for x in (q, k, v))
    qt, kt, vt, dot = (x.transpose(1, 2) for x in (q, k, v, do))
    res = {}
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        def fwd():
            with torch.no_grad():
                return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
        res["forward"] = time_ms(fwd)[0]
        if backward:
            out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
            res["backward"] = time_ms(lambda: torch.autograd.grad(out, (q, k, v), dot, retain_graph=True))[0]
            del out
    del q, k, v, do, qt, kt, vt, dot
    torch.cuda.empty_cache()
    return res


def flashlab_point(binary, impls, b, s, h, d, causal, backward, iters):
    cmd = [binary, "bench", "--json", "--quiet", "--no-check", "--no-sgemm", "--impl", impls,
           "--batch", str(b), "--seqlen", str(s), "--heads", str(h), "--head-dim", str(d),
           "--dtype", "bf16", "--iters", str(iters)]
    cmd += ["--causal"] if causal else []
    cmd += ["--backward"] if backward else []
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    try:
        doc = json.loads(r.stdout)
    except json.JSONDecodeError:
        return {}, {}, (r.stderr or r.stdout).strip()[-300:]
    flops = doc["flops"]  # flashlab::attention_flops of this shape: {"forward": ..., "backward": ...}
    out = {}
    for row in doc["rows"]:
        if row["ms_median"] is not None and row["status"] in ("pass", "unchecked"):
            out[(row["impl"], row["pass"])] = row["ms_median"]
    bad = [f'{row["impl"]} {row["pass"]}: {row["status"]} {row["message"]}' for row in doc["rows"]
           if row["status"] not in ("pass", "unchecked")]
    return out, flops, "; ".join(bad)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--flashlab", default="build-carry/bin/flashlab")
    ap.add_argument("--impl", default="cuda_sm80")
    ap.add_argument("--hdims", default="64,128,256")
    ap.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--causal", default="both")
    ap.add_argument("--no-backward", action="store_true")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--md", default="", help="also write the markdown table here")
    args = ap.parse_args()
    impls = args.impl.split(",")
    backward = not args.no_backward
    passes = ["forward"] + (["backward"] if backward else [])
    causals = {"both": [False, True], "0": [False], "1": [True]}[args.causal]
    points = [(d, s, c) for d in map(int, args.hdims.split(",")) for c in causals
              for s in map(int, args.seqlens.split(","))]
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}; bf16, batch = 16384/seqlen, "
          f"heads = 2048/hdim; median ms, L2 flushed; {len(points)} points", flush=True)
    rows, ratios = [], {(i, p): [] for i in impls for p in passes}
    t0 = time.time()
    for n, (d, s, causal) in enumerate(points, 1):
        b, h = max(1, 16384 // s), max(1, 2048 // d)
        peer = sdpa_point(b, s, h, d, causal, backward)
        ours, flops, err = flashlab_point(args.flashlab, args.impl, b, s, h, d, causal, backward, args.iters)
        for p in passes:
            pf = flops.get(p)  # None when the CLI gave no JSON (its error is printed below)
            row = {"hdim": d, "seqlen": s, "causal": causal, "pass": p, "sdpa_ms": peer[p],
                   "sdpa_tflops": pf / peer[p] / 1e9 if pf else None}
            for i in impls:
                ms = ours.get((i, p))
                row[i] = (ms, pf / ms / 1e9 if ms and pf else None, peer[p] / ms if ms else None)
                if ms:
                    ratios[(i, p)].append(peer[p] / ms)
            rows.append(row)
            line = " ".join(f"{i} {row[i][1]:.0f} TF/s ({row[i][2]:.2f}x)" if row[i][1] else f"{i} -"
                            for i in impls)
            sdpa = f"{row['sdpa_tflops']:.0f} TF/s" if pf else f"{peer[p]:.3f} ms"
            print(f"[{n}/{len(points)} {time.time() - t0:4.0f}s] d{d} s{s} {'causal' if causal else 'full'} "
                  f"{p}: sdpa_flash {sdpa} | {line}", flush=True)
        if err:
            print(f"    flashlab: {err}", flush=True)
    head = "| hdim | seqlen | causal | pass | SDPA flash ms | TFLOP/s |" + "".join(
        f" {i} ms | TFLOP/s | × SDPA |" for i in impls)
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        cells = "".join(f" {r[i][0]:.3f} | {r[i][1]:.0f} | {r[i][2]:.2f} |" if r[i][0] else " – | – | – |"
                        for i in impls)
        sdpa_tflops = f"{r['sdpa_tflops']:.0f}" if r["sdpa_tflops"] else "–"
        lines.append(f"| {r['hdim']} | {r['seqlen']} | {int(r['causal'])} | {r['pass']} | {r['sdpa_ms']:.3f} | "
                     f"{sdpa_tflops} |{cells}")
    lines.append("")
    for (i, p), v in ratios.items():
        if v:
            lines.append(f"- {i} {p}: median {statistics.median(v):.2f}× SDPA flash, min {min(v):.2f}×, "
                         f"≥ 1.0× at {sum(x >= 1.0 for x in v)}/{len(v)} points")
    table = "\n".join(lines)
    print(table)
    if args.md:
        with open(args.md, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
