"""Import-order check for flashlab next to PyTorch on a GPU machine (python/run_gpu.sh runs it).

Each case runs in a fresh interpreter, so a crash (segfault) is reported instead of ending the run:
    python python/scripts/import_order_check.py
"""

import os
import subprocess
import sys

CASES = {
    "torch first": "import torch; import flashlab; flashlab.build_info(); print(torch.cuda.is_available())",
    "flashlab first": "import flashlab; import torch; print(torch.cuda.is_available())",
    "flashlab first, build_info before torch": (
        "import flashlab; flashlab.build_info(); import torch; print(torch.cuda.is_available())"
    ),
}
MAPS = (
    "; import re; print(sorted({l.split()[-1] for l in open('/proc/self/maps') "
    "if re.search(r'lib(cudart|cublas|cublasLt|gomp)[.-]', l)}))"
)


def main():
    failures = 0
    for preload in ("default", "FLASHLAB_NO_TORCH_LIBS=1"):
        env = dict(os.environ)
        if preload != "default":
            env["FLASHLAB_NO_TORCH_LIBS"] = "1"
        for name, code in CASES.items():
            try:
                r = subprocess.run([sys.executable, "-c", code + MAPS], env=env, capture_output=True,
                                   text=True, timeout=45, cwd="/tmp")  # fmt: skip
                rc, text = r.returncode, r.stdout + r.stderr
            except subprocess.TimeoutExpired:
                rc, text = "timeout", ""
            failures += rc != 0 and preload == "default"
            print(f"[{preload}] {name}: rc={rc}")
            print("   ", text.strip().replace("\n", "\n    ")[-1500:])
    print(f"import-order failures with the default set-up: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
