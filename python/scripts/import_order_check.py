"""Does flashlab live next to PyTorch in one process? A matrix of import/initialization orders.

    python python/scripts/import_order_check.py        # python/run_gpu.sh runs it on the GPU machine

Each case runs in a fresh interpreter (a crash is reported instead of ending the run), once with
the environment as given and once with LD_LIBRARY_PATH unset, each statement announced before it
runs, under faulthandler; the CUDA/OpenMP libraries loaded by then are printed before the last
statement. The "torch only" rows are the controls: if they crash, flashlab is not the cause.
"""

import glob
import importlib.util
import os
import subprocess
import sys


def _flashlab_lib():
    """The libflashlab.so the installed package loads, found without importing anything."""
    spec = importlib.util.find_spec("flashlab")
    for d in (spec.submodule_search_locations or []) if spec else []:
        hits = sorted(glob.glob(os.path.join(d, "libflashlab*.so*")))
        if hits:
            return hits[0]
    return "libflashlab.so"


LIB = _flashlab_lib()
# An LD_PRELOAD library printing the native stack on SIGSEGV/SIGABRT (python/scripts/crash_backtrace.c,
# built by tools/device_bundle.sh): Python 3.12's faulthandler shows only Python frames.
TRACER = os.environ.get("FLASHLAB_CRASH_TRACER", "")

CASES = {
    "torch only: is_available": ["import torch", "torch.cuda.is_available()"],
    "torch only: device name, then is_available": [
        "import torch", "torch.cuda.get_device_name()", "torch.cuda.is_available()"],
    "torch first, torch CUDA first": [
        "import torch", "torch.cuda.get_device_name()", "import flashlab", "flashlab.build_info()",
        "torch.cuda.is_available()"],
    "torch first, flashlab CUDA first": [
        "import torch", "import flashlab", "flashlab.build_info()", "torch.cuda.is_available()"],
    "flashlab first, no flashlab CUDA call": ["import flashlab", "import torch", "torch.cuda.is_available()"],
    "flashlab first, flashlab CUDA first": [
        "import flashlab", "flashlab.build_info()", "import torch", "torch.cuda.is_available()"],
    # Bisection: which piece of `import flashlab` matters?
    "control: numpy, then torch": ["import numpy", "import torch", "torch.cuda.is_available()"],
    "libflashlab.so alone (ctypes), then torch": [
        "import ctypes", f"ctypes.CDLL({LIB!r})", "import torch", "torch.cuda.is_available()"],
    "torch, then libflashlab.so alone (ctypes)": [
        "import torch", "import ctypes", f"ctypes.CDLL({LIB!r})", "torch.cuda.is_available()"],
    "torch preload only (flashlab._preload), then torch": [
        "from flashlab._preload import preload_torch_cuda_libs", "preload_torch_cuda_libs()",
        "import torch", "torch.cuda.is_available()"],
}  # fmt: skip

MAPS = (
    "import re; print('    loaded:', sorted({l.split()[-1] for l in open('/proc/self/maps') "
    "if re.search(r'lib(cudart|cublas|cublasLt|gomp|flashlab)[.-]', l)}), flush=True)"
)


def program(steps):
    lines = []
    for i, step in enumerate(steps):
        if i == len(steps) - 1:
            lines.append(MAPS)
        lines += [f"print({'  step: ' + step!r}, flush=True)", step]
    return "\n".join(lines) + "\nprint('  ok', flush=True)\n"


def run(steps, env):
    try:
        r = subprocess.run([sys.executable, "-X", "faulthandler", "-c", program(steps)], env=env,
                           capture_output=True, text=True, timeout=60, cwd="/tmp")  # fmt: skip
        return r.returncode, r.stdout + r.stderr
    except subprocess.TimeoutExpired:
        return "timeout", ""


def main():
    envs = {"as given": dict(os.environ)}
    envs["LD_LIBRARY_PATH unset"] = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    envs["no torch preload"] = dict(os.environ, FLASHLAB_NO_TORCH_LIBS="1")
    if TRACER and os.path.exists(TRACER):
        for env in envs.values():
            env["LD_PRELOAD"] = TRACER
        print("native stacks via LD_PRELOAD", TRACER)
    print("libflashlab:", LIB)
    print("LD_LIBRARY_PATH:", os.environ.get("LD_LIBRARY_PATH", "(unset)"))
    table = []
    for env_name, env in envs.items():
        for name, steps in CASES.items():
            # The other environments only re-run what failed as given (each case costs a torch import).
            if env_name != "as given" and ("as given", name, 0) in table:
                continue
            rc, text = run(steps, env)
            table.append((env_name, name, rc))
            print(f"[{env_name}] {name}: rc={rc}")
            # Keep the step trail and the first lines of a faulthandler traceback.
            keep = [l for l in text.splitlines() if l.startswith(("  step", "    loaded", "  ok"))]
            keep += [l for l in text.splitlines() if "Fatal" in l or "free()" in l or "File" in l][:6]
            if rc != 0:  # the native stack: crash_backtrace frames (not the object list)
                keep += [l for l in text.splitlines()
                         if "[crash_backtrace] signal" in l or (l.startswith("/") and "(" in l)][:40]
            print("\n".join(keep))
    print("\n| environment | case | rc |\n|---|---|---|")
    for env_name, name, rc in table:
        print(f"| {env_name} | {name} | {rc} |")
    bad = [t for t in table if t[0] == "as given" and t[2] != 0]
    print(f"import-order failures as given: {len(bad)} of {len(CASES)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
