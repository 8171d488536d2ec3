#!/usr/bin/env bash
# learn/run_gpu.sh — everything one GPU session checks for the forward learning path, in one go.
#
#   learn/run_gpu.sh <bin-dir> [phases]      phases: any of validate,memcheck,racecheck,time,sdpa,ncu
#                                            (default: all, in that order)
#
# <bin-dir> holds attention_forward and libflashlab.so (built elsewhere: carried to the GPU machine).
# Logs go to $OUT (or ./out-learn when OUT is unset); the last lines printed are the summary.
#   validate   attention_forward all --no-time: every version on the awkward-shape sweep vs the
#              float64 CPU reference
#   memcheck   compute-sanitizer --tool memcheck on the small-shape sweep (every version)
#   racecheck  compute-sanitizer --tool racecheck on the small-shape sweep
#   time       attention_forward run_all --no-validate: the progression table (standard shape)
#              (validate ran just before on the same binary)
#   sdpa       learn/bench_sdpa.py: PyTorch SDPA flash backend, fwd and bwd, same shapes
#   ncu        shared-memory bank conflicts of v3 vs v4 (one launch each, seqlen 2048)
set -uo pipefail
BIN=${1:?usage: learn/run_gpu.sh <bin-dir> [phases]}
PHASES=${2:-validate,memcheck,racecheck,time,sdpa,ncu}
OUT=${OUT:-out-learn}
mkdir -p "$OUT"
# cuBLAS: the toolkit's, else the one PyTorch ships (nvidia-cublas wheel).
TORCH_CUBLAS=$(python3 -c 'import nvidia.cublas as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$BIN:/usr/local/cuda/lib64:${TORCH_CUBLAS}:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1
AF="$BIN/attention_forward"
SEQLENS=${SEQLENS:-2048,4096,8192,16384}
summary=()
has() { [[ ",$PHASES," == *",$1,"* ]]; }
note() { summary+=("$1"); echo "## $1"; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$OUT/gpu.txt"

if has validate; then
  "$AF" all --no-time 2>&1 | tee "$OUT/validate.log"
  note "validate rc=$? $(grep -E '^  v[0-9]: ' "$OUT/validate.log" | tr '\n' ';')"
fi
if has memcheck; then
  compute-sanitizer --tool memcheck "$AF" all --small --no-time --seed 7 >"$OUT/memcheck.log" 2>&1
  note "memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
fi
if has racecheck; then
  compute-sanitizer --tool racecheck --racecheck-report all "$AF" all --small --no-time --seed 7 \
    >"$OUT/racecheck.log" 2>&1
  note "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUT/racecheck.log" | tail -1)"
fi
if has time; then
  "$AF" run_all --no-validate --seqlens "$SEQLENS" 2>&1 | tee "$OUT/time.log"
  note "time rc=$?"
fi
if has sdpa; then
  python3 learn/bench_sdpa.py --seqlens "$SEQLENS" 2>&1 | tee "$OUT/sdpa.log"
  note "sdpa rc=$?"
fi
if has ncu; then
  for v in 3 4; do
    ncu --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,smsp__inst_executed_op_ldsm.sum,gpu__time_duration.sum \
      -k "regex:fa2_(mma|pipelined)_kernel" -c 1 \
      "$AF" "$v" --no-validate --seqlens 2048 --causal 0 --peak 1 >"$OUT/ncu_v$v.log" 2>&1
    note "ncu v$v rc=$? $(grep -E 'bank_conflicts|ldsm|duration' "$OUT/ncu_v$v.log" | awk '{print $1"="$NF}' | tr '\n' ' ')"
  done
fi

echo
echo "==== summary"
printf '%s\n' "${summary[@]}"
