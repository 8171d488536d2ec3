"""Ring attention (flashlab.distributed) scaling over the GPUs of one machine: weak and strong.

    python benchmarks/ring_scaling.py                       # every GPU count up to the machine's, defaults below
    python benchmarks/ring_scaling.py --gpus 1,2,4 --weak 32768 --strong 262144:8,1048576:4 --out DIR
    python benchmarks/ring_scaling.py --device cpu --gpus 1,2 --weak 256 --strong 512:2 --head-dim 32   # smoke, gloo

For each process count N of --gpus it starts N processes (one per GPU, NCCL; gloo on the CPU) and
times, per configuration, the forward and forward + backward of

* N = 1: ``flashlab.torch.attention`` on the whole sequence (the one-GPU baseline);
* N > 1: ``flashlab.distributed.ring_attention`` on each rank's shard (zigzag for causal), in each
  communication mode of --modes: ``overlap`` (the library: the next K/V block travels while the
  current one is computed), ``serial`` (each transfer waited for before the next compute is
  queued) and ``none`` (nothing travels: the compute alone). overlap ≈ none shows the
  communication hidden; serial − none is what it costs when it is not.

A timed call is bracketed by a device synchronization and a barrier on every rank; its time is the
slowest rank's (an all-reduce of the maximum); the figure is the median over --iters calls after
one warm-up call. Weak scaling keeps the sequence per GPU fixed (--weak, tokens per GPU), so the
work per GPU grows with N (the sequence does: attention is quadratic): efficiency =
N · T1(S_local) / T_N, with T1 the time per call of N one-GPU calls run back to back (a ring rank's
N blocks are that much work in one busy stretch, and a lone call of a few ms can run faster per
FLOP than a long stretch of work); the efficiency against one lone call is printed beside it.
Strong scaling keeps the whole sequence fixed (--strong SEQ:HEADS): efficiency
= T1(S) / (N · T_N). TFLOP/s per GPU counts 4·S²·H·D forward FLOPs (half of them causal), 2.5× that
backward, over N GPUs. batch 1, bf16 (fp32 on the CPU), head dim --head-dim, K/V heads = heads.

Prints a line per timed configuration as it finishes, then the tables (markdown); --out DIR also
writes DIR/ring_scaling.json and DIR/ring_scaling.md. docs/distributed.md and docs/perf.md quote it.
"""

import argparse
import json
import os
import socket
import statistics
import sys
import time


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _configs(args, world):
    """(kind, seqlen_total, heads, causal, mode) timed with `world` processes."""
    causals = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    modes = ["single"] if world == 1 else args.modes.split(",")
    out = []
    for s_local in args.weak:
        for c in causals:
            out += [("weak", s_local * world, args.heads, c, m) for m in modes]
    for seq, heads in args.strong:
        for c in causals:
            # strong scaling: the library's mode only (the modes are compared on the weak runs)
            out += [("strong", seq, heads, c, m) for m in modes if m in ("single", "overlap")]
    return out


def _worker(rank, world, port, args, result_path):
    import torch
    import torch.distributed as dist

    import flashlab.distributed as fd
    import flashlab.torch as fl

    on_gpu = args.device == "cuda"
    if on_gpu:
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast off (the lent machines' rule)
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                device_id=device)
        dtype = torch.bfloat16
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
        device = torch.device("cpu")
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
        dtype = torch.float32

    def sync():
        if on_gpu:
            torch.cuda.synchronize()
        dist.barrier()

    def slowest(seconds):
        t = torch.tensor([seconds], dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.item()

    def timed(fn, iters, reps=1):
        """Median ms per call of `reps` calls back to back (one bracket around them all)."""
        fn()  # warm-up
        times = []
        for _ in range(iters):
            sync()
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            if on_gpu:
                torch.cuda.synchronize()
            times.append(slowest(time.perf_counter() - t0) / reps)
        return statistics.median(times) * 1e3

    results = []
    d = args.head_dim
    for kind, seq, heads, causal, mode in _configs(args, world):
        n = seq // world
        g = torch.Generator(device=device).manual_seed(1234 + rank)
        q, k, v, dout = (torch.randn(1, n, heads, d, generator=g, device=device, dtype=dtype) for _ in range(4))

        if mode == "single":
            def attend(a, b, c, _causal=causal):
                return fl.attention(a, b, c, causal=_causal)
        else:
            def attend(a, b, c, _causal=causal):
                return fd.ring_attention(a, b, c, causal=_causal)

        def fwd():
            with torch.no_grad():
                attend(q, k, v)

        def step():
            a, b, c = (x.detach().requires_grad_() for x in (q, k, v))
            torch.autograd.grad(attend(a, b, c), (a, b, c), dout)

        iters = args.iters if seq < args.long_seq else max(1, args.iters - 1)
        # The one-GPU weak baseline is also timed as N calls back to back for each ring size N:
        # the same work and the same busy stretch as a ring rank's N blocks (a lone call of a few
        # ms can run faster per FLOP than a long stretch of work: docs/distributed.md).
        back_to_back = sorted({w for w in args.worlds if w > 1}) if (kind == "weak" and mode == "single") else []
        with fd._comm_mode("overlap" if mode == "single" else mode):
            t_fwd = timed(fwd, iters)
            t_step = timed(step, iters)
            reps = {w: (timed(fwd, iters, w), timed(step, iters, w)) for w in back_to_back}
        del q, k, v, dout
        r = {"kind": kind, "world": world, "seqlen": seq, "seqlen_local": n, "heads": heads, "head_dim": d,
             "causal": causal, "mode": mode, "fwd_ms": t_fwd, "fwd_bwd_ms": t_step, "bwd_ms": t_step - t_fwd,
             "back_to_back": {str(w): {"fwd_ms": f, "fwd_bwd_ms": b} for w, (f, b) in reps.items()}}
        results.append(r)
        if rank == 0:
            print(f"[ring] N={world} {kind} S={seq} (local {n}) h{heads} d{d} causal={causal} {mode}: "
                  f"fwd {t_fwd:.2f} ms, fwd+bwd {t_step:.2f} ms"
                  + "".join(f"; {w} back to back: {f:.2f} / {b:.2f} ms per call" for w, (f, b) in reps.items()),
                  flush=True)
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        with open(result_path, "w") as f:
            json.dump(results, f)


def _flops(r):
    f = 4.0 * r["seqlen"] ** 2 * r["heads"] * r["head_dim"] * (0.5 if r["causal"] else 1.0)
    return f, 2.5 * f


def _tables(results):
    base = {}  # (seqlen, heads, causal) -> the one-GPU result
    for r in results:
        if r["mode"] == "single":
            base[(r["seqlen"], r["heads"], r["causal"])] = r
    lines = []
    for kind, title, note in (
        ("weak", "Weak scaling (tokens per GPU fixed)",
         "efficiency = N·T1(S/N) / T_N, T1 per call of N one-GPU calls back to back (and of one call alone)"),
        ("strong", "Strong scaling (whole sequence fixed)", "efficiency = T1(S) / (N·T_N)"),
    ):
        rows = [r for r in results if r["kind"] == kind]
        if not rows:
            continue
        weak = kind == "weak"
        lines += [f"### {title}: {note}", "",
                  "| N | S (per GPU) | heads | causal | comm | fwd ms | fwd+bwd ms | fwd TFLOP/s/GPU "
                  "| bwd TFLOP/s/GPU | efficiency fwd | efficiency fwd+bwd |"
                  + (" vs one call: fwd | fwd+bwd |" if weak else ""),
                  "|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if weak else "")]
        for r in sorted(rows, key=lambda r: (r["causal"], r["seqlen_local"] if kind == "weak" else r["seqlen"],
                                             r["world"], r["mode"])):
            n = r["world"]
            ff, fb = _flops(r)
            tf_f = ff / n / (r["fwd_ms"] * 1e-3) / 1e12
            tf_b = fb / n / (r["bwd_ms"] * 1e-3) / 1e12 if r["bwd_ms"] > 0 else float("nan")
            def pct(e):
                return f"{e[0]:.1%} | {e[1]:.1%}" if e and n > 1 else "– | –"

            if weak:
                b = base.get((r["seqlen_local"], r["heads"], r["causal"]))
                one = (n * b["fwd_ms"] / r["fwd_ms"], n * b["fwd_bwd_ms"] / r["fwd_bwd_ms"]) if b else None
                bb = (b or {}).get("back_to_back", {}).get(str(n))
                eff = (n * bb["fwd_ms"] / r["fwd_ms"], n * bb["fwd_bwd_ms"] / r["fwd_bwd_ms"]) if bb else None
                effs = f"{pct(eff)} | {pct(one)}"
            else:
                b = base.get((r["seqlen"], r["heads"], r["causal"]))
                effs = pct((b["fwd_ms"] / (n * r["fwd_ms"]), b["fwd_bwd_ms"] / (n * r["fwd_bwd_ms"])) if b else None)
            lines.append(f"| {n} | {r['seqlen']} ({r['seqlen_local']}) | {r['heads']} | {r['causal']} | {r['mode']} | "
                         f"{r['fwd_ms']:.2f} | {r['fwd_bwd_ms']:.2f} | {tf_f:.3g} | {tf_b:.3g} | {effs} |")
        lines.append("")
    # communication hidden: overlap against none (compute alone) and serial, per weak configuration
    modes = {}
    for r in results:
        if r["kind"] == "weak" and r["world"] > 1:
            modes.setdefault((r["world"], r["seqlen"], r["causal"]), {})[r["mode"]] = r
    if any(len(m) > 1 for m in modes.values()):
        lines += ["### Communication: overlap vs serial vs none (weak runs; fwd+bwd ms)", "",
                  "| N | S | causal | none (compute only) | overlap | serial | overlap over none | serial over none |",
                  "|---|---|---|---|---|---|---|---|"]
        for (n, s, c), m in sorted(modes.items(), key=lambda x: (x[0][2], x[0][1], x[0][0])):
            t = {k: m[k]["fwd_bwd_ms"] for k in m}
            none = t.get("none")

            def rel(x):
                return f"{x / none - 1:+.1%}" if none and x else "–"

            def ms(mode):
                return f"{t[mode]:.2f}" if mode in t else "–"

            lines.append(f"| {n} | {s} | {c} | {ms('none')} | {ms('overlap')} | {ms('serial')} "
                         f"| {rel(t.get('overlap'))} | {rel(t.get('serial'))} |")
        lines.append("")
    return "\n".join(lines)


def _seq_heads(text):
    out = []
    for part in filter(None, text.split(",")):
        s, _, h = part.partition(":")
        out.append((int(s), int(h) if h else 8))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", default=None, help="process counts, e.g. 1,2,4 (default: 1, 2, 4, ... up to the GPUs)")
    ap.add_argument("--weak", default="32768", help="tokens per GPU for weak scaling, comma-separated ('' for none)")
    ap.add_argument("--strong", default="262144:8,1048576:4",
                    help="whole sequences for strong scaling, SEQ:HEADS comma-separated ('' for none)")
    ap.add_argument("--heads", type=int, default=16, help="heads of the weak runs")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    ap.add_argument("--modes", default="overlap,serial,none", help="communication modes of the ring runs")
    ap.add_argument("--iters", type=int, default=3, help="timed calls per figure (median); one fewer from --long-seq")
    ap.add_argument("--long-seq", type=int, default=524288)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--out", default=None, help="directory for ring_scaling.json and ring_scaling.md")
    args = ap.parse_args(argv)
    args.weak = [int(x) for x in args.weak.split(",") if x]
    args.strong = _seq_heads(args.strong)

    import torch
    import torch.multiprocessing as mp

    if args.device == "cuda":
        avail = torch.cuda.device_count()
        if avail == 0:
            sys.exit("ring_scaling: no CUDA device (use --device cpu for the gloo smoke run)")
    else:
        avail = 64
    worlds = [int(x) for x in args.gpus.split(",")] if args.gpus else \
        [n for n in (1, 2, 4, 8) if n <= avail]  # fmt: skip
    if max(worlds) > avail:
        sys.exit(f"ring_scaling: {max(worlds)} processes asked for, {avail} GPUs present")
    args.worlds = worlds
    for n in worlds:
        for s in args.weak:
            if s % 2:
                sys.exit("ring_scaling: --weak tokens per GPU must be even (zigzag halves)")
        for s, _ in args.strong:
            if s % (2 * n):
                sys.exit(f"ring_scaling: --strong sequence {s} does not divide into 2·{n} zigzag chunks")
    import tempfile

    results = []
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for n in worlds:
            path = os.path.join(tmp, f"world{n}.json")
            print(f"[ring] {n} process(es), {len(_configs(args, n))} configurations ...", flush=True)
            t0 = time.perf_counter()
            mp.spawn(_worker, args=(n, _free_port(), args, path), nprocs=n, join=True)
            print(f"[ring] {n} process(es) done in {time.perf_counter() - t0:.0f} s", flush=True)
            with open(path) as f:
                results += json.load(f)
    dev = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    head = (f"ring_scaling: {dev}, torch {torch.__version__}, head dim {args.head_dim}, "
            f"{'bf16' if args.device == 'cuda' else 'fp32'}, batch 1; medians of {args.iters} calls "
            f"({time.perf_counter() - t_all:.0f} s in all)")
    text = head + "\n\n" + _tables(results)
    print("\n" + text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "ring_scaling.json"), "w") as f:
            json.dump(results, f, indent=1)
        with open(os.path.join(args.out, "ring_scaling.md"), "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
