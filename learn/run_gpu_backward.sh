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
source "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"
learn_setup "learn/run_gpu_backward.sh <bin-dir> [phases]" out-learn-bwd "$@"
AB="$BIN/attention_backward"

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
  timeout "${T_TIME:-200}" "$AB" run_all --no-validate --deterministic --seqlens "$SEQLENS" \
    --versions "${TIME_VERSIONS:-0,1,2,3,4}" 2>&1 | tee "$OUT/time.log"
  note "time rc=$?"
fi
if has sdpa; then
  timeout "${T_SDPA:-60}" python3 learn/bench_sdpa.py --seqlens "$SEQLENS" 2>&1 | tee "$OUT/sdpa.log"
  note "sdpa rc=$?"
fi
if has ncu; then
  ncu_bank_conflicts "$AB" "bwd_v[34]_kernel" 'bank_conflicts|ldsm|wavefronts|duration' timeout "${T_NCU:-25}"
fi
print_summary
