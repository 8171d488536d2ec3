#!/usr/bin/env python3
"""learn/basics/ncu_vs_sim.py — the warp simulator's counts next to Nsight Compute's, same kernels.

The cuda_basics exercises are graded on a Python warp simulator (learn/exercises/cuda_basics/sim.py)
that counts 32-byte global-memory sectors and shared-memory bank-conflict ways per warp
instruction. This script runs the simulator on the exercises' own solution / mutant files, runs the
CUDA versions of the same kernels (learn/basics/cuda/04_coalescing.cu, 05_transpose.cu, in their
--ncu mode: the same launch shape) under ncu, and prints both per warp request, with the ratio:

    strided_vs_coalesced  solution (interleaved)  vs  mutant chunked   global load sectors / request
    transpose_padded      mutant unpadded, solution (padded), transpose_swizzle solution
                                                       shared load wavefronts / request (= n-way)

    python learn/basics/ncu_vs_sim.py --bin build-basics [--out DIR]   simulator + ncu (needs a GPU)
    python learn/basics/ncu_vs_sim.py --sim-only                          simulator figures only
    python learn/basics/ncu_vs_sim.py --parse FILE.csv ...                re-read saved ncu CSVs

Exit status 0 when every hardware figure is within 5 % of the simulator's (issue 15's criterion).
"""

import argparse
import csv
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
EXERCISES = ROOT / "learn" / "exercises"
sys.path.insert(0, str(EXERCISES))
from cuda_basics import sim  # noqa: E402

# One launch shape each, shared by the simulator and the CUDA program's --ncu mode.
SCALE = dict(n=8192, grid=2, block=128)  # 256 threads, k = 32 elements per thread when chunked
TRANSPOSE = dict(rows=32, cols=32)        # one block of 32 x 32 threads

GLOBAL_LD = ["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"]
GLOBAL_ST = ["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"]
SHARED_LD = ["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "smsp__inst_executed_op_shared_ld.sum",
             "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"]
SHARED_ST = ["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum", "smsp__inst_executed_op_shared_st.sum",
             "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"]

# (label, exercise file, CUDA kernel name, program, what is compared)
CASES = [
    ("coalesced: interleaved (strided_vs_coalesced solution)", "strided_vs_coalesced/solution.py",
     "scale_interleaved", "04_coalescing", "global"),
    ("strided: chunked, k = 32 (strided_vs_coalesced mutant)", "strided_vs_coalesced/mutants/chunked.py",
     "scale_chunked", "04_coalescing", "global"),
    ("transpose tile[32][32] (transpose_padded mutant unpadded)", "transpose_padded/mutants/unpadded.py",
     "transpose_unpadded", "05_transpose", "shared"),
    ("transpose tile[32][33] (transpose_padded solution)", "transpose_padded/solution.py",
     "transpose_padded", "05_transpose", "shared"),
    ("transpose swizzled (transpose_swizzle solution)", "transpose_swizzle/solution.py",
     "transpose_swizzled", "05_transpose", "shared"),
]


def load(rel):
    path = EXERCISES / "cuda_basics" / rel
    spec = importlib.util.spec_from_file_location("ncu_vs_sim_" + rel.replace("/", "_")[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def simulate(rel, space):
    """Per-warp-request figures of the exercise file on the simulator (same launch as --ncu)."""
    mod = load(rel)
    rng = np.random.default_rng(0)
    if space == "global":
        n = SCALE["n"]
        x = rng.standard_normal(n).astype(np.float32)
        y = np.full_like(x, np.nan)
        st = sim.launch(mod.scale, SCALE["grid"], SCALE["block"], x, y, n)
        assert np.array_equal(y, 2 * x), f"{rel}: wrong values on the simulator"
        return {"load sectors / request": st.sectors("load", "x") / st.requests("global", "load", "x"),
                "store sectors / request": st.sectors("store", "y") / st.requests("global", "store", "y")}
    rows, cols = TRANSPOSE["rows"], TRANSPOSE["cols"]
    a = rng.standard_normal((rows, cols)).astype(np.float32)
    out = np.full((cols, rows), np.nan, np.float32)
    st = sim.launch(mod.transpose, (1, 1), (32, 32), a, out, rows, cols)
    assert np.array_equal(out, a.T), f"{rel}: wrong values on the simulator"
    return {"shared load wavefronts / request": st.wavefronts("load", "tile") / st.requests("shared", "load", "tile"),
            "shared store wavefronts / request": st.wavefronts("store", "tile") / st.requests("shared", "store", "tile")}


def parse_ncu_csv(text):
    """{kernel name: {metric: value}} from `ncu --csv --print-units base` output (other lines skipped)."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    out = {}
    if not lines:
        return out
    for row in csv.DictReader(lines):
        name, metric, value = row.get("Kernel Name", ""), row.get("Metric Name", ""), row.get("Metric Value", "")
        try:
            v = float(value.replace(",", ""))
        except ValueError:
            continue
        short = name.split("(")[0].replace("void ", "").strip()
        m = out.setdefault(short, {})
        m[metric] = m.get(metric, 0.0) + v  # several launches of one kernel: summed
    return out


def run_ncu(program, kernel_regex, metrics, args, log):
    cmd = ["ncu", "--csv", "--print-units", "base", "--metrics", ",".join(metrics), "-k", f"regex:{kernel_regex}",
           "--log-file", str(log), str(program), "--ncu", *args]
    print("$", " ".join(cmd), flush=True)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"ncu did not run: {type(e).__name__}: {e}", flush=True)
        return ""
    print(r.stdout[-2000:], r.stderr[-2000:], sep="", flush=True)
    return log.read_text() if log.exists() else ""


def hardware(measured, kernel, space):
    m = next((v for k, v in measured.items() if k.endswith(kernel)), None)
    if m is None:
        return None

    def per(num, den):
        return m[num] / m[den] if m.get(den) else float("nan")

    if space == "global":
        return {"load sectors / request": per(*GLOBAL_LD), "store sectors / request": per(*GLOBAL_ST),
                "_extra": f"ld requests {m.get(GLOBAL_LD[1], 0):.0f}, st requests {m.get(GLOBAL_ST[1], 0):.0f}"}
    return {"shared load wavefronts / request": per(SHARED_LD[0], SHARED_LD[1]),
            "shared store wavefronts / request": per(SHARED_ST[0], SHARED_ST[1]),
            "_extra": f"ld bank conflicts / request {per(SHARED_LD[2], SHARED_LD[1]):.2f}, "
                      f"st {per(SHARED_ST[2], SHARED_ST[1]):.2f}"}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build-basics", help="folder with 04_coalescing and 05_transpose")
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="where the ncu CSVs and the table go")
    ap.add_argument("--sim-only", action="store_true")
    ap.add_argument("--parse", nargs="*", default=None, help="saved ncu CSV logs instead of running ncu")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    sims = {label: simulate(rel, space) for label, rel, _, _, space in CASES}
    measured = {}
    if args.parse is not None:
        for f in args.parse:
            measured.update(parse_ncu_csv(Path(f).read_text()))
    elif not args.sim_only:
        binp = Path(args.bin)
        scale_args = ["--n", str(SCALE["n"]), "--grid", str(SCALE["grid"]), "--block", str(SCALE["block"])]
        measured.update(parse_ncu_csv(run_ncu(binp / "04_coalescing", "scale_", GLOBAL_LD + GLOBAL_ST, scale_args,
                                              out / "ncu_coalescing.csv")))
        measured.update(parse_ncu_csv(run_ncu(binp / "05_transpose", "transpose_(unpadded|padded|swizzled)",
                                              SHARED_LD + SHARED_ST, [], out / "ncu_transpose.csv")))

    rows = ["| kernel (exercise file) | figure | simulator | ncu (H100) | ncu / sim | within 5 % |",
            "|---|---|---|---|---|---|"]
    ok = True
    for label, rel, kernel, _, space in CASES:
        hw = hardware(measured, kernel, space) if measured else None
        for fig, s in sims[label].items():
            if hw is None:
                rows.append(f"| {label} | {fig} | {s:.2f} | pending | | |")
                ok = ok and args.sim_only
                continue
            h = hw[fig]
            ratio = h / s if s else float("nan")
            good = abs(ratio - 1) <= 0.05
            ok = ok and good
            rows.append(f"| {label} | {fig} | {s:.2f} | {h:.2f} | {ratio:.3f} | {'yes' if good else 'NO'} |")
        if hw is not None:
            rows.append(f"| {label} | ncu extra | | {hw['_extra']} | | |")
    table = "\n".join(rows)
    print(table)
    (out / "ncu_vs_sim.md").write_text(table + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
