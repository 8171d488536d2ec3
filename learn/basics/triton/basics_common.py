"""learn/basics/triton/basics_common.py — what the Triton-basics programs share.

Each program (docs/learn/basics-triton.md) checks its kernel against torch first, then times both
with triton.testing.do_bench (median, L2 flushed between reps) and prints one machine-readable line
per measurement, the same format as the CUDA basics (learn/basics/summarize.py reads both):

    result | <program> | <case> | <value> | <unit> | <note>

Without a CUDA GPU, setup() turns on Triton's interpreter (TRITON_INTERPRET=1, read when a
@triton.jit decorator runs, hence before the kernels are imported) and the programs run a tiny,
untimed check only (`--small`): python/tests/test_basics_triton.py runs them that way on the CPU.
The exercises' reference solutions are reused where they are the lesson (load_solution).
"""

import argparse
import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
EXERCISES = ROOT / "learn" / "exercises"


def setup(description):
    """Parses --small; returns (args, device). Sets TRITON_INTERPRET=1 when there is no GPU."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--small", action="store_true", help="tiny sizes, check only (forced without a GPU)")
    args = ap.parse_args()
    import torch

    gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") != "1"
    if not gpu:
        os.environ["TRITON_INTERPRET"] = "1"
        args.small = True
        sys.path.insert(0, str(EXERCISES))  # the interpreter fix of the exercises (NumPy >= 2.3)
        from triton_support import _fix_interpreter_index  # noqa: PLC0415

        import triton  # noqa: F401, PLC0415

        _fix_interpreter_index()
    return args, ("cuda" if gpu else "cpu")


def load_solution(exercise):
    """The module learn/exercises/triton/<exercise>/solution.py (its @triton.jit kernels included)."""
    path = EXERCISES / "triton" / exercise / "solution.py"
    spec = importlib.util.spec_from_file_location(f"basics_solution_{exercise}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def check_close(name, got, want, rtol, atol):
    """Prints `validate <name> ok/FAILED`; returns bool. got/want: tensors (compared in float64)."""
    import torch

    g, w = got.detach().double().cpu(), want.detach().double().cpu()
    err = (g - w).abs()
    bad = ~(err <= atol + rtol * w.abs())
    if bad.any():
        i = int(bad.flatten().nonzero()[0])
        print(f"  validate {name:<40} FAILED: {int(bad.sum())} of {g.numel()} wrong, first at {i}: "
              f"got {g.flatten()[i].item():.7g}, want {w.flatten()[i].item():.7g}", flush=True)
        return False
    print(f"  validate {name:<40} ok (max |err| {err.max().item() if err.numel() else 0:.3g})", flush=True)
    return bool(torch.isfinite(g).all())


def bench(fn):
    """Median ms of fn() (triton.testing.do_bench: warm-up, L2 flush before each rep)."""
    import triton.testing

    return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")


def result(program, case, value, unit, note="-"):
    print(f"  {case:<46} {value:12.4g} {unit} {note}")
    print(f"result | {program} | {case} | {value:.4g} | {unit} | {note}", flush=True)


def gbps(nbytes, ms):
    return nbytes / (ms * 1e-3) / 1e9


def copy_gbps(nbytes):
    """torch's device-to-device copy of nbytes, (read + write) / time: the 100 % line."""
    import torch

    a = torch.empty(nbytes // 4, device="cuda", dtype=torch.float32).normal_()
    b = torch.empty_like(a)
    return gbps(2 * nbytes, bench(lambda: b.copy_(a)))


def finish(program, ok):
    print(f"{program}: {'all versions validated' if ok else 'VALIDATION FAILED'}", flush=True)
    return 0 if ok else 1
