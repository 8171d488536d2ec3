#!/usr/bin/env bash
# python/run_gpu_triton.sh — on the GPU machine: the Triton kernels' tests, their tile sweep, and the
# peer benchmark (python -m flashlab.bench). Run from the repo root; with build-carry/ carried
# (tools/device_bundle.sh) the flashlab extension is built first so the benchmark has flashlab's
# C++ rows; without it (or if the build fails) the Triton kernels still run from the source tree.
#
#   device run, carry ["build-carry"]:  bash python/run_gpu_triton.sh [phases]
#   phases (default build,test,tune,bench): comma-separated
#   BENCH_ARGS="--hdims 64,128" bash python/run_gpu_triton.sh bench
#   BENCH2_ARGS="--impls flex --hdims 128": a second sweep merged into the same table
#   BENCH_RESUME_DIR=bench-resume (carried): continue the points of an earlier call
#   SCRIPT_BUDGET=570: seconds for the whole script; the benchmark's --deadline is what is left
#
# $OUT (default out-triton) gets at most 8 files: setup.log, pytest.log, tune.txt, bench.md,
# bench.png, results.jsonl, header.md, extra.tgz (everything else); a summary prints last.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
START=$(date +%s)
# The whole script stays inside one 600 s device call: the benchmark gets what the other phases
# leave (its --deadline), minus a margin for rendering the table and the plot.
SCRIPT_BUDGET=${SCRIPT_BUDGET:-570}
OUT=${OUT:-out-triton}
PHASES=${1:-build,test,tune,bench}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)   # absolute: the phases run from /tmp
export PYTHONUNBUFFERED=1
has() { [[ ",$PHASES," == *",$1,"* ]]; }
summary=()
LOG=$OUT/setup.log

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  python3 -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)'
} >"$LOG" 2>&1

# The flashlab package: built and installed (then flashlab.torch works) or, failing that, a stub
# package whose __path__ is the source folder, so flashlab.triton imports without the extension.
flashlab_ok=0
if has build && [ -f build-carry/lib/libflashlab.so ]; then
  LIB=$ROOT/build-carry/lib
  WHEEL_LIBS=$(python3 -c 'import glob, os, nvidia
hits = [h for p in nvidia.__path__ for h in glob.glob(os.path.join(p, "**", "libcublas.so.*"), recursive=True)]
print(":".join(sorted({os.path.dirname(h) for h in hits})))' 2>/dev/null)
  export LD_LIBRARY_PATH="$LIB:/usr/local/cuda/lib64:${WHEEL_LIBS}:${LD_LIBRARY_PATH:-}"
  t0=$(date +%s)
  FLASHLAB_LIB_DIR=$LIB timeout ${BUILD_TIMEOUT:-240} python3 -m pip install --no-build-isolation --no-deps --no-index \
    -C build-dir=/tmp/flashlab-python-build ./python >>"$LOG" 2>&1 &&
    (cd /tmp && python3 -c 'import flashlab.torch') >>"$LOG" 2>&1 && flashlab_ok=1
  summary+=("build: flashlab.torch importable=$flashlab_ok ($(($(date +%s) - t0)) s)")
fi
if [ $flashlab_ok -eq 0 ]; then
  mkdir -p /tmp/flashlab-stub/flashlab
  echo "__path__ = ['$ROOT/python/flashlab']" >/tmp/flashlab-stub/flashlab/__init__.py
  export PYTHONPATH=/tmp/flashlab-stub${PYTHONPATH:+:$PYTHONPATH}
  summary+=("flashlab extension not built: Triton and peers only (stub package)")
fi
# Run from /tmp so that `import flashlab` finds the installed package (or the stub), never ./python.
cd /tmp

if has test; then
  t0=$(date +%s)
  # -n 8 (pytest-xdist): the compiles of the kernel variants run in parallel processes.
  # --noconftest: python/tests/conftest.py needs the extension; these tests do not.
  xdist=$(python3 -c 'import xdist' 2>/dev/null && echo "-n 8")
  timeout ${TEST_TIMEOUT:-300} python3 -m pytest -q -rs $xdist --noconftest --durations=10 -p no:cacheprovider \
    ${TEST_ARGS:-} "$ROOT/python/tests/test_triton.py" >"$OUT/pytest.log" 2>&1
  rc=$?
  tail -25 "$OUT/pytest.log"
  summary+=("triton tests rc=$rc ($(($(date +%s) - t0)) s): $(tail -1 "$OUT/pytest.log")")
fi
if has tune; then
  t0=$(date +%s)
  timeout ${TUNE_TIMEOUT:-200} python3 -m flashlab.triton.tune ${TUNE_ARGS:-} 2>&1 | tee "$OUT/tune.txt"
  summary+=("tune rc=${PIPESTATUS[0]} ($(($(date +%s) - t0)) s)")
fi
if has bench; then
  t0=$(date +%s)
  mkdir -p /tmp/bench-out
  # Resume from an earlier call's points: carry a folder holding its results.jsonl + header.md.
  if [ -n "${BENCH_RESUME_DIR:-}" ] && [ -f "$ROOT/$BENCH_RESUME_DIR/results.jsonl" ]; then
    cp "$ROOT/$BENCH_RESUME_DIR"/results.jsonl "$ROOT/$BENCH_RESUME_DIR"/header.md /tmp/bench-out/ 2>/dev/null
    BENCH_ARGS="--resume ${BENCH_ARGS:-}"
  fi
  left=$((SCRIPT_BUDGET - ($(date +%s) - START) - 30))
  # tqdm's bar goes to stderr: keep it out of the log, whose tail is the table.
  timeout ${BENCH_TIMEOUT:-$((left + 20))} python3 -m flashlab.bench --out /tmp/bench-out --deadline $left ${BENCH_ARGS:-} \
    >"$OUT/bench.log" 2>"$OUT/bench.err"
  rc=$?
  # An optional second sweep into the same results (e.g. the compile-heavy flex peer on fewer
  # shapes): --resume keeps the first sweep's points.
  if [ -n "${BENCH2_ARGS:-}" ]; then
    timeout ${BENCH2_TIMEOUT:-300} python3 -m flashlab.bench --out /tmp/bench-out --resume $BENCH2_ARGS \
      >>"$OUT/bench.log" 2>>"$OUT/bench.err"
    rc=$?
  fi
  # Killed by the timeout: render the table and plot from the points measured so far.
  [ $rc -ne 0 ] && python3 -m flashlab.bench --out /tmp/bench-out --render-only >>"$OUT/bench.log" 2>&1
  cp /tmp/bench-out/bench.md /tmp/bench-out/bench.png /tmp/bench-out/results.jsonl /tmp/bench-out/header.md "$OUT/" 2>/dev/null
  summary+=("bench rc=$rc ($(($(date +%s) - t0)) s)")
fi
cd "$OUT"
extras=$(ls | grep -v -E '^(setup.log|pytest.log|tune.txt|bench.md|bench.png|results.jsonl|header.md)$')
[ -n "$extras" ] && tar czf extra.tgz $extras -C /tmp bench-out 2>/dev/null && rm -f $extras
ls -la
if [ -f bench.md ]; then grep -E '^(###|\| (impl|triton|flashlab|sdpa_flash))' bench.md | head -80; fi
echo "==== summary"
printf '%s\n' "${summary[@]}"
