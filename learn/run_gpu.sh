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
source "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"
learn_setup "learn/run_gpu.sh <bin-dir> [phases]" out-learn "$@"
AF="$BIN/attention_forward"

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
  ncu_bank_conflicts "$AF" "fa2_(mma|pipelined)_kernel" 'bank_conflicts|ldsm|duration'
fi
print_summary
