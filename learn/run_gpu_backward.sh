#!/usr/bin/env bash
# learn/run_gpu_backward.sh — everything one GPU session checks for the backward learning path.
#
#   learn/run_gpu_backward.sh <bin-dir> [phases]   phases: any of validate,memcheck,racecheck,time,sdpa,ncu
#                                                  (default: all, in that order)
#
# <bin-dir> holds attention_backward and libflashlab.so (built elsewhere, carried to the GPU
# machine). Logs go to $OUT (or ./out-learn-bwd when OUT is unset); the summary is printed last.
# Every phase runs under `timeout` (a hang in one phase must not eat the whole device call).
#   validate   attention_backward all --no-time --deterministic: every version on the awkward-shape
#              sweep vs the float64 CPU reference, atomic and deterministic dQ (3 runs bitwise equal)
#   memcheck   compute-sanitizer memcheck, small shapes, bf16, both dQ modes, every version
#   racecheck  compute-sanitizer racecheck (shared-memory hazards), small shapes, bf16, hdim 64, v1..v4
#   time       attention_backward run_all --no-validate --deterministic: the progression table on the
#              standard shape (validate ran just before on the same binary)
#   sdpa       learn/bench_sdpa.py: PyTorch SDPA flash backend, fwd and bwd, same shapes
#   ncu        shared-memory bank conflicts of the v3 vs v4 backward kernels (one launch each)
# Environment: SEQLENS (default 2048,4096,8192,16384); T_<PHASE> timeouts in seconds;
#   MEM_VERSIONS / RACE_VERSIONS / TIME_VERSIONS (default 0,1,2,3,4 / 1,2,3,4 / 0,1,2,3,4);
#   RACE_HDIM (default 64: racecheck is ~100x slower than a plain run, and the barrier structure
#   of every kernel is the same for both head dims).
set -uo pipefail
BIN=${1:?usage: learn/run_gpu_backward.sh <bin-dir> [phases]}
PHASES=${2:-validate,memcheck,racecheck,time,sdpa,ncu}
OUT=${OUT:-out-learn-bwd}
mkdir -p "$OUT"
TORCH_CUBLAS=$(python3 -c 'import nvidia.cublas as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$BIN:/usr/local/cuda/lib64:${TORCH_CUBLAS}:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1
AB="$BIN/attention_backward"
SEQLENS=${SEQLENS:-2048,4096,8192,16384}
summary=()
has() { [[ ",$PHASES," == *",$1,"* ]]; }
note() { summary+=("$1"); echo "## $1"; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$OUT/gpu.txt"

if has validate; then
  timeout "${T_VALIDATE:-150}" "$AB" all --no-time --deterministic 2>&1 | tee "$OUT/validate.log"
  note "validate rc=$? $(grep -E '^  v[0-9]: ' "$OUT/validate.log" | tr '\n' ';')"
fi
if has memcheck; then
  timeout "${T_MEMCHECK:-90}" compute-sanitizer --tool memcheck "$AB" all --small --only-dtype bf16 --deterministic \
    --versions "${MEM_VERSIONS:-0,1,2,3,4}" --no-time --seed 7 >"$OUT/memcheck.log" 2>&1
  note "memcheck rc=$? $(grep -E '^  v[0-9]: ' "$OUT/memcheck.log" | tr '\n' ';') $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
fi
if has racecheck; then
  timeout "${T_RACECHECK:-240}" compute-sanitizer --tool racecheck --racecheck-report all "$AB" all --small \
    --only-dtype bf16 --only-hdim "${RACE_HDIM:-64}" --versions "${RACE_VERSIONS:-1,2,3,4}" --no-time --seed 7 >"$OUT/racecheck.log" 2>&1
  note "racecheck rc=$? $(grep -E '^  v[0-9]: ' "$OUT/racecheck.log" | tr '\n' ';') $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUT/racecheck.log" | tail -1)"
fi
if has time; then
  timeout "${T_TIME:-150}" "$AB" run_all --no-validate --deterministic --seqlens "$SEQLENS" \
    --versions "${TIME_VERSIONS:-0,1,2,3,4}" 2>&1 | tee "$OUT/time.log"
  note "time rc=$?"
fi
if has sdpa; then
  timeout "${T_SDPA:-60}" python3 learn/bench_sdpa.py --seqlens "$SEQLENS" 2>&1 | tee "$OUT/sdpa.log"
  note "sdpa rc=$?"
fi
if has ncu; then
  for v in 3 4; do
    timeout "${T_NCU:-25}" ncu --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,smsp__inst_executed_op_ldsm.sum,gpu__time_duration.sum \
      -k "regex:bwd_v[34]_kernel" -c 1 \
      "$AB" "$v" --no-validate --seqlens 2048 --causal 0 --peak 1 >"$OUT/ncu_v$v.log" 2>&1
    note "ncu v$v rc=$? $(grep -E 'bank_conflicts|ldsm|wavefronts|duration' "$OUT/ncu_v$v.log" | awk '{print $1"="$NF}' | tr '\n' ' ')"
  done
fi

echo
echo "==== summary"
printf '%s\n' "${summary[@]}"
