#!/usr/bin/env bash
# python/run_gpu.sh — build the Python package ON the GPU machine and run its tests there, GPU
# tests included. Run from the repo root with build-carry/ carried (tools/device_bundle.sh makes
# it: the CUDA libflashlab.so in build-carry/lib):
#
#   device run, carry ["build-carry", "python/.wheels"]:  bash python/run_gpu.sh [import]
#   (`import`: only build the extension and run the import-order matrix)
#
# python/.wheels (optional): `pip download --no-deps -d python/.wheels nanobind==2.9.2
# scikit-build-core==0.11.6`, the versions tools/setup.sh pins.
#
# The extension must be compiled by the device's Python (3.12 there); it links the carried
# library and copies it into the installed package. Logs go to $OUT (default out-python):
# env.txt, build.log, import_order.log, core.log, torch_<variant>.log, overhead.md; a summary
# prints last.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out-python}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
LIB=${FLASHLAB_LIB_DIR:-$PWD/build-carry/lib}
# libflashlab.so needs libcudart and libcublas (.so.13): the toolkit's, else the wheels torch uses;
# libgomp comes from build-carry/lib.
WHEEL_LIBS=$(python3 -c 'import glob, os, nvidia
hits = [h for p in nvidia.__path__ for h in glob.glob(os.path.join(p, "**", "libcublas.so.*"), recursive=True)]
print(":".join(sorted({os.path.dirname(h) for h in hits})))' 2>/dev/null)
export LD_LIBRARY_PATH="$LIB:/usr/local/cuda/lib64:${WHEEL_LIBS}:${LD_LIBRARY_PATH:-}"
summary=()
# The nanobind and scikit-build-core that CI pins (tools/setup.sh), when carried as wheels in
# python/.wheels (pure Python; git-ignored), replace the device image's own versions.
if ls python/.wheels/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/flashlab-site python/.wheels/*.whl &&
    export PYTHONPATH=/tmp/flashlab-site${PYTHONPATH:+:$PYTHONPATH}
fi

{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  python3 -c 'import sys, torch, nanobind, scikit_build_core, numpy
print("python", sys.version.split()[0], "torch", torch.__version__, "nanobind", nanobind.__version__,
      "scikit-build-core", scikit_build_core.__version__, "numpy", numpy.__version__)'
} 2>&1 | tee "$OUT/env.txt"

t0=$(date +%s)
{ env | grep -E '^(CC|CXX|CFLAGS|CXXFLAGS|LDFLAGS|CMAKE_[A-Z_]*)=' ; c++ --version | head -1; } >"$OUT/build.log" 2>&1
FLASHLAB_LIB_DIR=$LIB python3 -m pip install -v --no-build-isolation --no-deps --no-index \
  -C build-dir=/tmp/flashlab-python-build -C build.verbose=true ./python >>"$OUT/build.log" 2>&1
rc=$?
summary+=("build rc=$rc ($(($(date +%s) - t0)) s)")
if [ $rc -ne 0 ]; then
  tail -30 "$OUT/build.log"
else
  (cd /tmp && python3 -c 'import flashlab; print(flashlab.__file__, flashlab.build_info())') 2>&1 | tee -a "$OUT/env.txt"
  # What the module exports (should be PyInit__core alone) and what it links.
  core=$(python3 -c 'import importlib.util, glob, os; d = importlib.util.find_spec("flashlab").submodule_search_locations[0]; print(glob.glob(os.path.join(d, "_core*.so"))[0])')
  { echo "exports:"; nm -D --defined-only "$core" | head -20; ldd "$core"; } >>"$OUT/env.txt" 2>&1
  # flashlab and torch in one process: a matrix of import / CUDA-initialization orders, each in a
  # fresh interpreter (a crash is reported, not fatal), with controls that load torch alone.
  FLASHLAB_CRASH_TRACER=$LIB/crash_backtrace.so timeout 300 python3 python/scripts/import_order_check.py >"$OUT/import_order.log" 2>&1
  summary+=("import order rc=$?: $(tail -1 "$OUT/import_order.log")")
  if [ "${1:-}" = "import" ]; then  # `bash python/run_gpu.sh import`: build and the matrix only
    echo "==== summary"; printf '%s\n' "${summary[@]}"; exit 0
  fi
  # The NumPy tests alone (no torch in the process), then the torch tests. This package's tests
  # only: python/tests/test_triton.py belongs to the Triton run.
  FLASHLAB_TEST_IMPORT_ORDER=flashlab timeout 120 python3 -m pytest -rs python/tests/test_core.py \
    >"$OUT/core.log" 2>&1
  summary+=("test_core rc=$?: $(tail -1 "$OUT/core.log")")
  torch_tests() {  # label, then env assignments for the run
    local label=$1
    shift
    env "$@" timeout 240 python3 -m pytest -rs --durations=10 python/tests/test_torch.py \
      python/tests/test_torch_sinks.py python/tests/test_flash_attn.py >"$OUT/torch_$label.log" 2>&1
    local rc=$?
    summary+=("torch tests ($label) rc=$rc: $(tail -1 "$OUT/torch_$label.log")")
    return $rc
  }
  crashed() { [ "$1" -eq 139 ] || [ "$1" -eq 134 ] || [ "$1" -eq 124 ]; }
  # Torch tests with torch imported (and CUDA initialized) first, then flashlab first (see
  # python/tests/conftest.py); if the first crashes, once more without LD_LIBRARY_PATH.
  torch_tests torch_first
  rc=$?
  torch_tests flashlab_first FLASHLAB_TEST_IMPORT_ORDER=flashlab
  if crashed $rc; then torch_tests no_ld_path -u LD_LIBRARY_PATH; fi
  timeout 90 python3 python/scripts/measure_overhead.py 2>&1 | tee "$OUT/overhead.md"
  summary+=("overhead rc=${PIPESTATUS[0]}")
fi

echo "==== summary"
printf '%s\n' "${summary[@]}"
