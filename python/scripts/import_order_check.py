"""Does flashlab live next to PyTorch in one process? A matrix of import/initialization orders.

    python python/scripts/import_order_check.py        # python/run_gpu.sh runs it on the GPU machine

Each case runs in a fresh interpreter (a crash is reported instead of ending the run), once with
the environment as given and once with LD_LIBRARY_PATH unset, each statement announced before it
runs, under faulthandler; the CUDA/OpenMP libraries loaded by then are printed before the last
statement. The "torch only" rows are the controls: if they crash, flashlab is not the cause.
"""

import os
import subprocess
import sys

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
        lines += [f"print('  step: {step}', flush=True)", step]
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
    print("LD_LIBRARY_PATH:", os.environ.get("LD_LIBRARY_PATH", "(unset)"))
    table = []
    for env_name, env in envs.items():
        for name, steps in CASES.items():
            rc, text = run(steps, env)
            table.append((env_name, name, rc))
            print(f"[{env_name}] {name}: rc={rc}")
            # Keep the step trail and the first lines of a faulthandler traceback.
            keep = [l for l in text.splitlines() if l.startswith(("  step", "    loaded", "  ok"))]
            keep += [l for l in text.splitlines() if "Fatal" in l or "free()" in l or "File" in l][:6]
            print("\n".join(keep))
    print("\n| environment | case | rc |\n|---|---|---|")
    for env_name, name, rc in table:
        print(f"| {env_name} | {name} | {rc} |")
    bad = [t for t in table if t[0] == "as given" and t[2] != 0]
    print(f"import-order failures as given: {len(bad)} of {len(CASES)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
