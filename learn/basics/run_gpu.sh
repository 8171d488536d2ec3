#!/usr/bin/env bash
# learn/basics/run_gpu.sh — the CUDA and Triton basics on one GPU machine, in one go (issue 15).
#
#   OUT=<dir> bash learn/basics/run_gpu.sh            from the repository root; OUT defaults to out-basics
#
# Needs nvcc, ncu, compute-sanitizer, python3 with torch + triton. No CMake, no network, no CUTLASS.
# Every step has its own `timeout` and the whole run a deadline (BUDGET_S, default 420 s): a step
# that fails or runs out of time is logged and the next one runs; steps left when the deadline has
# passed are listed as skipped. Every step writes its log into a temporary folder ($LOGS, from
# mktemp -d); at the end $OUT gets exactly three files (the device tool returns at most 8 files a
# call, and a run makes about 30):
#
#   summary.md       learn/basics/summarize.py over $LOGS (criteria, results table, checks, steps)
#   steps.tsv        one line per step: name, rc, seconds, log file name
#   logs.tar.xz      every log and side file below; read one with
#                    tar -xJOf logs.tar.xz ./cuda_06_reduce.log   (or tar -xJf logs.tar.xz -C <dir>)
#
# The steps (file names inside logs.tar.xz in brackets):
#
#   A (timing: one thing on the GPU at a time)
#     build            nvcc -arch=sm_90a each learn/basics/cuda/*.cu into $BIN (build.log)
#     cuda_<prog>      each CUDA basics program: validate every version, then time (cuda_*.log)
#     triton_<prog>    each learn/basics/triton/*.py: check against torch, then time (triton_*.log;
#                      ir_stages also writes ir_vector_add.txt, ir_matmul.txt)
#   B (counts and checks, no timing: two lanes in parallel)
#     racecheck        compute-sanitizer racecheck on 03_sync_race's racy kernel (racecheck.log)
#     ncu_vs_sim       learn/basics/ncu_vs_sim.py: simulator vs ncu per warp request
#                      (ncu_vs_sim.log, ncu_vs_sim.md, ncu_coalescing.csv, ncu_transpose.csv)
#     check_triton     python learn/check.py triton --solutions, then --mutants, on the GPU
#                      (check_triton_gpu.log; the checker uses the GPU whenever torch sees one)
#   summary.md         learn/basics/summarize.py: every "result |" line, the issue-15 criteria, steps
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
DEST=${OUT:-out-basics}
BIN=${BIN:-build-basics}
PY=${PYTHON:-python3}
BUDGET_S=${BUDGET_S:-420}
mkdir -p "$DEST" "$BIN"
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/basics-logs.XXXXXX")
# the steps write into $LOGS: ir_stages.py and ncu_vs_sim.py put their side files under $OUT
OUT=$LOGS
export OUT PYTHONUNBUFFERED=1
T0=$(date +%s)
STEPS="$LOGS/steps.tsv"
: >"$STEPS"

# finish: summary.md, then $OUT gets summary.md, steps.tsv and one archive of all of $LOGS (summary
# and steps included). Runs once: at the end, or from the EXIT trap when an outer timeout or ^C
# stops the run early (after the step then running ends), so the logs so far still come back.
finished=0
finish() {
  [ "$finished" = 1 ] && return
  finished=1
  "$PY" learn/basics/summarize.py "$LOGS" | tee "$LOGS/summary.md"
  echo "total $(($(date +%s) - T0)) s"
  cp "$LOGS/summary.md" "$LOGS/steps.tsv" "$DEST/"
  if tar -cJf "$DEST/logs.tar.xz" -C "$LOGS" .; then
    rm -rf "$LOGS"
    echo "wrote $DEST/summary.md, $DEST/steps.tsv, $DEST/logs.tar.xz"
  else
    echo "tar -cJ failed: the logs stay in $LOGS"
  fi
}
trap finish EXIT
trap 'exit 143' TERM INT

left() { echo $((BUDGET_S - ($(date +%s) - T0))); }
# step <name> <limit s> <log> <command...>: runs with timeout min(limit, time left), records rc and seconds.
step() {
  local name=$1 limit=$2 log=$3 t rc
  shift 3
  local remaining
  remaining=$(left)
  if [ "$remaining" -le 5 ]; then
    printf '%s\tskipped\t0\t%s\n' "$name" "$log" >>"$STEPS"
    echo "## $name skipped (deadline)"
    return
  fi
  [ "$limit" -gt "$remaining" ] && limit=$remaining
  t=$(date +%s)
  timeout -k 5 "$limit" "$@" >>"$LOGS/$log" 2>&1
  rc=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(($(date +%s) - t))" "$log" >>"$STEPS"
  echo "## $name rc=$rc ($(($(date +%s) - t)) s) -> $log"
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv >"$LOGS/gpu.txt" 2>&1
"$PY" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' >>"$LOGS/gpu.txt" 2>&1
nvcc --version | tail -1 >>"$LOGS/gpu.txt"
cat "$LOGS/gpu.txt"

# ---- A. build (parallel nvcc, one binary per program), then the timed programs, one at a time
build() {  # run under `timeout bash -c build`: exported below
  local flags=(-std=c++17 -O3 -arch=sm_90a -lineinfo -DFLASHLAB_WITH_CUDA -I include -I src -I learn)
  nvcc -std=c++17 -O3 -c -I include -o "$BIN/status.o" src/api/status.cpp || return 1
  local pids=() f p rc=0
  for f in learn/basics/cuda/*.cu; do
    nvcc "${flags[@]}" -o "$BIN/$(basename "$f" .cu)" "$f" "$BIN/status.o" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  return $rc
}
export -f build
export BIN
step build 180 build.log bash -c build

for f in learn/basics/cuda/*.cu; do
  prog=$(basename "$f" .cu)
  step "cuda_$prog" 60 "cuda_$prog.log" "$BIN/$prog"
done
for f in vector_add softmax_fused online_softmax matmul block_ptr torch_op ir_stages; do
  step "triton_$f" 120 "triton_$f.log" "$PY" "learn/basics/triton/$f.py"
done

# ---- B. counts and checks: two lanes in parallel (nothing here is timed)
(
  step racecheck 60 racecheck.log compute-sanitizer --tool racecheck --racecheck-report hazard \
    "$BIN/03_sync_race" --racecheck-only --blocks 4
  step ncu_vs_sim 240 ncu_vs_sim.log "$PY" learn/basics/ncu_vs_sim.py --bin "$BIN" --out "$LOGS"
) &
lane1=$!
(
  step check_triton_solutions 200 check_triton_gpu.log "$PY" learn/check.py triton --solutions
  step check_triton_mutants 200 check_triton_gpu.log "$PY" learn/check.py triton --mutants -v
) &
lane2=$!
wait "$lane1" "$lane2"

finish  # also the EXIT trap's work when the run is cut short: $OUT gets what there is
