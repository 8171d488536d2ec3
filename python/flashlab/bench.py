"""python -m flashlab.bench — flashlab's attention beside its peers, in one run on one GPU.

Implementations (--impls, comma-separated; default: all that import):
    flashlab:<impl>[+det][@VAR=VALUE]
                           flashlab's C++ library through flashlab.torch (e.g. flashlab:learn_v4;
                           +det = deterministic backward; @VAR=VALUE sets an environment variable
                           around each call, for A/Bs of a library knob in one process, e.g.
                           flashlab:auto@FLASHLAB_SM90_FWD_CTAS=2147483647). Skipped with a note if
                           the extension is not built.
    triton_fa2, triton_fa1 flashlab.triton (the Triton learning kernels)
    triton_fa2_tma         flashlab.triton's Hopper step: fa2 with the forward's tiles moved by TMA
    sdpa_flash, sdpa_efficient, sdpa_cudnn
                           torch.nn.functional.scaled_dot_product_attention, one backend each
    flex                   FlexAttention, torch.compile(flex_attention, dynamic=False) compiled once
                           per shape (the recompile limits are raised for the grid); causal through
                           a block mask made once per shape
    fa4                    FlashAttention-4 (flash_attn.cute.flash_attn_func, CuTe-DSL; its SM90 path
                           on an H100), where it imports: ../shared/tools/prepare_fa4_peer.sh puts
                           it on the GPU machine
Peers (the "ratio" column divides by the best of them at each point): sdpa_*, flex, fa4.
flashlab:auto is what a user gets: on an H100 cuda_sm90's forward and backward, cuda_sm80's where
cuda_sm90 does not serve a call (dropout; sink tokens beside a left window in the forward above
head dim 192).

Grid (the issue-4 grid): bf16, head_dim in --hdims, seqlen_q = seqlen_k in --seqlens,
batch = 16384 / seqlen, heads = 2048 / head_dim (--tokens, --width), causal and not, fwd and bwd.
Layout (batch, seqlen, heads, head_dim) for every implementation (SDPA and Flex get transposed
views of the same memory). With seqlen_q = seqlen_k SDPA's top-left causal mask equals flashlab's
bottom-right one.

Timing: CUDA events around each call, warm-up first (compilation stays out), a 256 MiB buffer zeroed
between calls (flushes the 50 MB L2), median of the reps that fit --budget-ms. The forward is timed
with inputs that require grad (the training forward: LSE is saved); the backward is
autograd.grad of that output. FLOPs are flashlab.attention_flops, the C++ library's mask-aware count
(4 * head_dim per visible (query, key) pair and head forward, 2.5x that backward); where the extension
is not built (python/run_gpu_triton.sh's stub package) the points keep their ms, without TFLOP/s.
An implementation whose single call passes --cap-ms is timed once there, and one whose call passes
half of it is skipped at larger seqlens (FA1's last points take seconds).

Output: a markdown table (stdout and DIR/bench.md), DIR/results.jsonl and DIR/results.csv, and
DIR/bench.png (TFLOP/s vs seqlen, one panel per head_dim x causal x pass).

    python -m flashlab.bench [--hdims 64,128,256] [--seqlens 512,...,16384] [--causal both|0|1]
        [--impls ...] [--passes fwd,bwd] [--out DIR] [--quick] [--budget-ms 150] [--cap-ms 1000]
        [--deadline SECONDS] [--resume] [--render-only]

Decode (one query token against a K/V cache, TB/s): python -m flashlab.bench_decode (docs/kvcache.md).
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time

PEERS = ("sdpa_flash", "sdpa_efficient", "sdpa_cudnn", "flex", "fa4")
DEFAULT_IMPLS = "flashlab:auto,flashlab:cuda_sm80,flashlab:learn_v4,triton_fa2,triton_fa2_tma,triton_fa1,sdpa_flash,sdpa_efficient,sdpa_cudnn,flex,fa4"
DEFAULT_SEQLENS = "512,1024,2048,4096,8192,16384"


def point_flops(batch, heads, seqlen, head_dim, causal, backward):
    """FLOPs of one grid point from flashlab.attention_flops (bottom-right causal, as flashlab's
    kernels; equal to SDPA's top-left mask at seqlen_q = seqlen_k), or None without the extension."""
    try:
        from flashlab import attention_flops
    except ImportError:  # the stub package: flashlab.triton and the peers only
        return None
    fwd, bwd = attention_flops(batch, seqlen, seqlen, heads, heads, head_dim, causal=causal)
    return bwd if backward else fwd


# ------------------------------------------------------------------------------------ the peers

class Skip(Exception):
    """An implementation that does not support a point: becomes a note in the table."""


def make_impl(name, torch):
    """Return f(q, k, v, causal) -> out for (batch, seqlen, heads, head_dim) tensors, or raise Skip."""
    import torch.nn.functional as F

    if name.startswith("flashlab:"):
        impl, env = name.split(":", 1)[1], None
        if "@" in impl:  # flashlab:<impl>@VAR=VALUE: the call runs with that environment variable set
            impl, assignment = impl.split("@", 1)
            if "=" not in assignment:
                raise Skip(f"{name!r}: expected @VAR=VALUE after the implementation")
            env = tuple(assignment.split("=", 1))
        det = impl.endswith("+det")
        impl = impl[:-4] if det else impl
        try:
            import flashlab.torch as fl  # lazily: the extension may not be built
        except Exception as e:  # noqa: BLE001 - any import failure means "not available"
            raise Skip(f"flashlab.torch not importable ({type(e).__name__}: {str(e).splitlines()[0][:80]})")
        if env is None:
            return lambda q, k, v, causal: fl.attention(q, k, v, causal=causal, impl=impl, deterministic=det)

        def with_env(q, k, v, causal):
            old = os.environ.get(env[0])
            os.environ[env[0]] = env[1]
            try:
                return fl.attention(q, k, v, causal=causal, impl=impl, deterministic=det)
            finally:
                if old is None:
                    del os.environ[env[0]]
                else:
                    os.environ[env[0]] = old
        return with_env
    if name in ("triton_fa2", "triton_fa2_tma", "triton_fa1"):
        try:
            from flashlab import triton as flt
        except Exception as e:  # noqa: BLE001
            raise Skip(f"flashlab.triton not importable ({type(e).__name__}: {e})")
        return {"triton_fa2": flt.fa2_attention, "triton_fa2_tma": flt.fa2_tma_attention,
                "triton_fa1": flt.fa1_attention}[name]
    if name.startswith("sdpa_"):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = {"sdpa_flash": SDPBackend.FLASH_ATTENTION, "sdpa_efficient": SDPBackend.EFFICIENT_ATTENTION,
                   "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION}[name]

        def sdpa(q, k, v, causal):
            with sdpa_kernel(backend):
                out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                     is_causal=causal)
            return out.transpose(1, 2)
        return sdpa
    if name == "flex":
        return make_flex(torch)
    if name == "fa4":
        try:
            from flash_attn.cute import flash_attn_func
        except Exception as e:  # noqa: BLE001 - not installed here
            raise Skip(f"flash_attn.cute not importable ({type(e).__name__}: {str(e).splitlines()[0][:80]})")

        def fa4(q, k, v, causal):
            out = flash_attn_func(q, k, v, causal=causal)
            return out[0] if isinstance(out, tuple) else out
        return fa4
    raise Skip(f"unknown implementation {name!r}")


_FLEX = {}


def compiled_flex(torch):
    """torch.compile(flex_attention, dynamic=False), created once per process and shared by
    make_flex and flashlab.bench_decode (dynamic=False: one specialized kernel per shape, recompiled
    per shape by dynamo; its recompile limits raised so that a sweep of shapes keeps compiling
    instead of falling back to flex_attention's unfused eager path)."""
    if "fn" not in _FLEX:
        from torch.nn.attention.flex_attention import flex_attention

        cfg = torch._dynamo.config
        for knob in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                     "accumulated_recompile_limit"):
            if hasattr(cfg, knob):
                setattr(cfg, knob, max(getattr(cfg, knob), 4096))
        _FLEX["fn"] = torch.compile(flex_attention, dynamic=False)
    return _FLEX["fn"]


def make_flex(torch):
    """FlexAttention compiled once (compiled_flex); block masks cached per (seqlen, causal)."""
    from torch.nn.attention.flex_attention import create_block_mask

    fn = compiled_flex(torch)
    _FLEX.setdefault("masks", {})

    def causal_mod(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    def flex(q, k, v, causal):
        mask = None
        if causal:
            key = (q.shape[1], k.shape[1])
            if key not in _FLEX["masks"]:
                _FLEX["masks"] = {key: create_block_mask(causal_mod, None, None, key[0], key[1], device=q.device)}
            mask = _FLEX["masks"][key]
        out = fn(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), block_mask=mask)
        return out.transpose(1, 2)
    return flex


# ------------------------------------------------------------------------------------ timing

FLUSH_MODES = ("write", "read")


class Timer:
    """CUDA-event timing of one call, L2 flushed before each rep with a 256 MiB buffer (5x the
    H100's 50 MB L2). flush="write" zeroes it: the L2 is then full of dirty lines, which the timed
    call writes back to memory as it evicts them (up to ~50 MB: SDPA cuDNN's decode step at 1k took
    61 us after it, 50.5 us after a read flush, H100; every implementation pays it alike, visible in
    calls of tens of microseconds).
    flush="read" sums it instead: the L2 holds clean lines of the buffer, nothing of the timed call's
    data and nothing to write back, as after a kernel that read its inputs."""

    def __init__(self, torch, budget_ms, min_reps=3, max_reps=50, flush="write", graph=False):
        if flush not in FLUSH_MODES:
            raise ValueError(f"flush must be one of {FLUSH_MODES}, not {flush!r}")
        self.torch, self.budget_ms, self.min_reps, self.max_reps = torch, budget_ms, min_reps, max_reps
        self.flush = torch.zeros(256 << 20, dtype=torch.uint8, device="cuda")
        self.flush_mode = flush
        # graph=True: fn is captured once in a CUDA graph and each rep replays it, so the time is the
        # GPU's alone (a replay's launch is a few microseconds of host time, whatever fn's Python costs).
        self.graph = graph

    def _capture(self, fn):
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):                    # a warm-up on a side stream before capture,
            fn()                                         # as torch.cuda.graph's documentation asks
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        torch.cuda.synchronize()
        return g

    def host_us(self, fn, reps=30):
        """Median host time of one call (perf_counter around it, the GPU drained before each), µs."""
        torch = self.torch
        times = []
        for _ in range(reps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
        return statistics.median(times)

    def _flush(self):
        if self.flush_mode == "write":
            self.flush.zero_()
        else:
            self.flush.view(self.torch.int64).sum()   # reads every line; the result is not used

    def __call__(self, fn, cap_ms):
        """Median ms of fn over the reps that fit the budget; (ms, reps). One rep if past cap_ms."""
        torch = self.torch
        fn()                                             # warm-up: compilation, autotuning, allocator
        torch.cuda.synchronize()
        graph = None
        if self.graph:
            graph = self._capture(fn)
            fn = graph.replay
        times, reps = [], self.max_reps
        while len(times) < reps:
            self._flush()
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
            if len(times) == 1:
                if times[0] > cap_ms:
                    break
                reps = max(self.min_reps, min(self.max_reps, int(self.budget_ms / max(times[0], 1e-3))))
        return statistics.median(times), len(times)


def progress(total):
    """tqdm if installed, else one stderr line updated in place."""
    try:
        from tqdm import tqdm
        return tqdm(total=total, file=sys.stderr, dynamic_ncols=True)
    except ImportError:
        class Line:
            def __init__(self):
                self.n, self.t0, self.desc = 0, time.time(), ""

            def set_description(self, desc):
                self.desc = desc

            def update(self, k=1):
                self.n += k
                sys.stderr.write(f"\r[{self.n}/{total}] {time.time() - self.t0:6.0f}s {self.desc:<60}")
                sys.stderr.flush()

            def close(self):
                sys.stderr.write("\n")
        return Line()


def run(args, impls, records, path_jsonl):
    import torch

    dtype = torch.bfloat16
    timer = Timer(torch, args.budget_ms, flush=args.flush)
    t0 = time.time()
    done = {(r["impl"], r["pass"], r["hdim"], r["causal"], r["seqlen"]): r for r in records}
    points = [(d, c, s) for d in args.hdims for c in args.causal for s in args.seqlens]
    bar = progress(len(points) * len(impls) * len(args.passes))
    fns, too_slow = {}, {}
    for d, causal, s in points:
        batch, heads = max(1, args.tokens // s), max(1, args.width // d)
        g = torch.Generator(device="cuda").manual_seed(s * 1000 + d)
        q, k, v, do = (torch.randn(batch, s, heads, d, device="cuda", dtype=dtype, generator=g) for _ in range(4))
        q, k, v = (x.requires_grad_() for x in (q, k, v))
        for name in impls:
            for ps in args.passes:
                bar.set_description(f"{name} {ps} d{d} {'causal' if causal else 'full'} {s}")
                key = (name, ps, d, causal, s)
                if key in done:                    # resumed: keep it, and its time-cap verdict
                    if 2 * (done[key]["ms"] or 0.0) > args.cap_ms:
                        too_slow[(name, ps, d, causal)] = f"{done[key]['ms']:.0f} ms at seqlen {s}: longer seqlens pass --cap-ms"
                    bar.update()
                    continue
                rec = {"impl": name, "pass": ps, "hdim": d, "causal": causal, "seqlen": s, "batch": batch,
                       "heads": heads, "ms": None, "tflops": None, "reps": 0, "note": ""}
                if args.deadline and time.time() - t0 > args.deadline:
                    rec["note"] = "not run: --deadline reached"
                elif (name, ps, d, causal) in too_slow:
                    rec["note"] = f"skipped: {too_slow[(name, ps, d, causal)]}"
                else:
                    if name not in fns:
                        try:
                            fns[name] = make_impl(name, torch)
                        except Skip as e:          # not importable: one note for every point
                            fns[name] = e
                        except Exception as e:  # noqa: BLE001 - e.g. a peer missing from this torch
                            fns[name] = Skip(f"{type(e).__name__}: {str(e).strip().splitlines()[0][:100]}")
                    if isinstance(fns[name], Skip):
                        rec["note"] = f"skipped: {fns[name]}"
                    else:
                        measure(rec, fns[name], q, k, v, do, causal, ps, timer, args, too_slow)
                records.append(rec)
                with open(path_jsonl, "a") as fh:
                    fh.write(json.dumps(rec) + "\n")
                bar.update()
        del q, k, v, do
        torch.cuda.empty_cache()
    bar.close()
    return records


def measure(rec, f, q, k, v, do, causal, ps, timer, args, too_slow):
    """Time one (implementation, pass, shape) point into rec; failures become its note."""
    import torch

    out = None
    try:
        if ps == "fwd":
            call = lambda: f(q, k, v, causal)  # noqa: E731
        else:
            out = f(q, k, v, causal)
            call = lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True)  # noqa: E731
        ms, reps = timer(call, args.cap_ms)
        s, d = rec["seqlen"], rec["hdim"]
        fl = point_flops(rec["batch"], rec["heads"], s, d, causal, backward=(ps == "bwd"))
        rec.update(ms=ms, tflops=fl / ms / 1e9 if fl else None, reps=reps)
        if ms > args.cap_ms:
            rec["note"] = f"1 rep (> {args.cap_ms:.0f} ms cap)"
        if 2 * ms > args.cap_ms:  # the next (doubled) seqlen would take at least twice as long
            too_slow[(rec["impl"], ps, d, causal)] = f"{ms:.0f} ms at seqlen {s}: longer seqlens pass --cap-ms"
    except Exception as e:  # noqa: BLE001 - an unsupported point is a note, not a crash
        what = "unsupported" if "Unsupported" in type(e).__name__ else f"failed: {type(e).__name__}"
        rec["note"] = f"{what}: {str(e).strip().splitlines()[0][:120] if str(e).strip() else ''}"
    finally:
        out = None  # noqa: F841 - frees the retained graph before the next point
        torch.cuda.synchronize()


# ------------------------------------------------------------------------------------ output

def best_peer(records):
    best = {}
    for r in records:
        if r["impl"] in PEERS and r["tflops"]:
            k = (r["pass"], r["hdim"], r["causal"], r["seqlen"])
            best[k] = max(best.get(k, 0.0), r["tflops"])
    return best


def render_markdown(records, header):
    best = best_peer(records)
    impls = list(dict.fromkeys(r["impl"] for r in records))
    seqlens = sorted({r["seqlen"] for r in records})
    lines = [header, ""]
    lines.append("Cells: TFLOP/s (ratio to the best peer at that point: max of "
                 + ", ".join(PEERS) + "), or ms where flashlab's extension (the FLOP count) was not built. "
                 "Notes under each table explain empty cells.")
    index = {(r["impl"], r["pass"], r["hdim"], r["causal"], r["seqlen"]): r for r in records}
    for ps in ("fwd", "bwd"):
        for d in sorted({r["hdim"] for r in records}):
            for causal in (False, True):
                if not any(r["pass"] == ps and r["hdim"] == d and r["causal"] == causal for r in records):
                    continue
                lines += ["", f"### {'Forward' if ps == 'fwd' else 'Backward'}, head_dim {d}, "
                              f"{'causal' if causal else 'full'}", ""]
                lines.append("| impl | " + " | ".join(f"{s // 1024}k" if s >= 1024 else str(s) for s in seqlens) + " |")
                lines.append("|---|" + "---|" * len(seqlens))
                notes = []
                for name in impls:
                    cells = []
                    for s in seqlens:
                        r = index.get((name, ps, d, causal, s))
                        if r is None:
                            cells.append("")
                        elif r["tflops"]:
                            b = best.get((ps, d, causal, s))
                            cells.append(f"{r['tflops']:.1f}" + (f" ({r['tflops'] / b:.2f})" if b else "")
                                         + ("¹" if r["reps"] == 1 else ""))
                        elif r["ms"]:                  # no FLOP count (extension not built)
                            cells.append(f"{r['ms']:.3f} ms" + ("¹" if r["reps"] == 1 else ""))
                        else:
                            cells.append("–")
                            if r["note"] and r["note"] not in notes:
                                notes.append(f"{name}: {r['note']}")
                    lines.append(f"| {name} | " + " | ".join(cells) + " |")
                lines += [""] + [f"- {n}" for n in dict.fromkeys(notes)]
    lines += ["", "¹ one call only (past the time cap).", "", "<details><summary>Every point: ms, TFLOP/s, "
              "ratio to the best peer</summary>", "",
              "| pass | hdim | causal | seqlen | batch | heads | impl | ms | TFLOP/s | ratio | reps | note |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        b = best.get((r["pass"], r["hdim"], r["causal"], r["seqlen"]))
        ratio = f"{r['tflops'] / b:.2f}" if r["tflops"] and b else ""
        ms = f"{r['ms']:.3f}" if r["ms"] else ""
        tf = f"{r['tflops']:.1f}" if r["tflops"] else ""
        lines.append(f"| {r['pass']} | {r['hdim']} | {int(r['causal'])} | {r['seqlen']} | {r['batch']} | {r['heads']} "
                     f"| {r['impl']} | {ms} | {tf} | {ratio} | {r['reps']} | {r['note']} |")
    lines += ["", "</details>", ""]
    return "\n".join(lines)


def render_plot(records, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not installed: no plot"
    hdims = sorted({r["hdim"] for r in records})
    cols = [(ps, c) for ps in ("fwd", "bwd") for c in (False, True)]
    fig, axes = plt.subplots(len(hdims), len(cols), figsize=(4.2 * len(cols), 3.4 * len(hdims)), squeeze=False)
    impls = list(dict.fromkeys(r["impl"] for r in records))
    # Fixed colour per implementation across panels; peers dashed.
    colors = {name: plt.get_cmap("tab10")(i % 10) for i, name in enumerate(impls)}
    styles = {name: ("--" if name in PEERS else "-") for name in impls}
    seqlens = sorted({r["seqlen"] for r in records})
    for i, d in enumerate(hdims):
        for j, (ps, causal) in enumerate(cols):
            ax = axes[i][j]
            for name in impls:
                pts = sorted((r["seqlen"], r["tflops"]) for r in records if r["impl"] == name and r["pass"] == ps
                             and r["hdim"] == d and r["causal"] == causal and r["tflops"])
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], styles[name], color=colors[name], marker="o",
                            ms=3, label=name)
            ax.set_xscale("log", base=2)
            ax.set_xticks(seqlens, [f"{x // 1024}k" if x >= 1024 else str(x) for x in seqlens])
            ax.set_ylim(bottom=0)
            ax.set_title(f"{ps}, d={d}, {'causal' if causal else 'full'}", fontsize=9)
            ax.set_xlabel("seqlen")
            ax.set_ylabel("TFLOP/s")
            ax.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    for row in axes:
        for ax in row:
            h, lab = ax.get_legend_handles_labels()
            for hh, ll in zip(h, lab):
                if ll not in labels:
                    handles.append(hh)
                    labels.append(ll)
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 8), fontsize=8)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"plot: {path}"


def write_outputs(records, out_dir, header):
    md = render_markdown(records, header)
    with open(os.path.join(out_dir, "bench.md"), "w") as fh:
        fh.write(md)
    with open(os.path.join(out_dir, "results.csv"), "w") as fh:
        fh.write("impl,pass,hdim,causal,seqlen,batch,heads,ms,tflops,reps,note\n")
        for r in records:
            fh.write(",".join(str(r[k]) if r[k] is not None else "" for k in
                              ("impl", "pass", "hdim", "causal", "seqlen", "batch", "heads", "ms", "tflops", "reps"))
                     + "," + json.dumps(r["note"]) + "\n")
    return md, render_plot(records, os.path.join(out_dir, "bench.png"))


def environment(argv, module="flashlab.bench"):
    import torch
    lines = [f"- date: {datetime.date.today().isoformat()}",
             f"- device: {torch.cuda.get_device_name()} ({torch.cuda.get_device_properties(0).multi_processor_count} SMs)",
             f"- torch {torch.__version__}"]
    try:
        import triton
        lines.append(f"- triton {triton.__version__}")
    except ImportError:
        pass
    lines.append(f"- command: `python -m {module} {' '.join(argv)}`")
    return "\n".join(lines)


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m flashlab.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hdims", default="64,128,256")
    ap.add_argument("--seqlens", default=DEFAULT_SEQLENS)
    ap.add_argument("--causal", default="both", choices=["both", "0", "1"])
    ap.add_argument("--impls", default=DEFAULT_IMPLS)
    ap.add_argument("--passes", default="fwd,bwd")
    ap.add_argument("--tokens", type=int, default=16384, help="batch = tokens / seqlen")
    ap.add_argument("--width", type=int, default=2048, help="heads = width / head_dim")
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--quick", action="store_true", help="hdims 64,128; seqlens 1024,4096; small budget")
    ap.add_argument("--budget-ms", type=float, default=150.0, help="timed milliseconds per point")
    ap.add_argument("--flush", choices=FLUSH_MODES, default="write",
                    help="how L2 is flushed before each call (Timer): write zeroes 256 MiB, read sums it")
    ap.add_argument("--cap-ms", type=float, default=1000.0, help="time cap of one call (see above)")
    ap.add_argument("--deadline", type=float, default=0.0, help="seconds; later points are noted, not run")
    ap.add_argument("--resume", action="store_true", help="keep DIR/results.jsonl's points, run the rest")
    ap.add_argument("--render-only", action="store_true", help="rewrite the table and plot from DIR/results.jsonl")
    args = ap.parse_args(argv)
    if args.quick:
        args.hdims, args.seqlens, args.budget_ms = "64,128", "1024,4096", min(args.budget_ms, 60.0)
    args.hdims = [int(x) for x in args.hdims.split(",")]
    args.seqlens = [int(x) for x in args.seqlens.split(",")]
    args.causal = {"both": [False, True], "0": [False], "1": [True]}[args.causal]
    args.passes = [p for p in args.passes.split(",") if p in ("fwd", "bwd")]
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    path_jsonl = os.path.join(args.out, "results.jsonl")
    records = []
    if (args.resume or args.render_only) and os.path.exists(path_jsonl):
        with open(path_jsonl) as fh:
            records = [json.loads(line) for line in fh if line.strip()]
        records = [r for r in records if r["ms"] or args.render_only]   # retry failed points
    header_path = os.path.join(args.out, "header.md")
    if args.render_only:
        header = open(header_path).read() if os.path.exists(header_path) else "## flashlab.bench"
    else:
        import torch
        if not torch.cuda.is_available():
            print("python -m flashlab.bench needs a CUDA GPU", file=sys.stderr)
            return 2
        impls = [x for x in args.impls.split(",") if x]
        header = ("## flashlab.bench: attention forward and backward, bf16\n\n" + environment(argv)
                  + f"\n- grid: batch = {args.tokens} / seqlen, heads = {args.width} / head_dim, seqlen_q = seqlen_k; "
                  + f"{args.budget_ms:.0f} ms of timed calls per point, median; L2 flushed between calls "
                  + f"({args.flush} flush)")
        if args.resume and os.path.exists(header_path):   # a later sweep merged into this table
            header = open(header_path).read() + f"\n- merged with: `python -m flashlab.bench {' '.join(argv)}`"
        with open(header_path, "w") as fh:
            fh.write(header)
        with open(path_jsonl, "w") as fh:      # rewrite: keeps the resumed points, drops failed ones
            fh.writelines(json.dumps(r) + "\n" for r in records)
        records = run(args, impls, records, path_jsonl)
    md, plot_note = write_outputs(records, args.out, header)
    print(md)
    print(plot_note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
