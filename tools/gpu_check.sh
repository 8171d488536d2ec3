#!/usr/bin/env bash
# tools/gpu_check.sh — everything one device call checks, run ON the GPU machine from the repo root
# with build-carry/ carried (see tools/device_bundle.sh). Logs go to $OUT; a summary prints last.
#
#   bash tools/gpu_check.sh [phases]
#   phases (default all): info,cputests,bench,learn_fwd,learn_bwd
#     info       nvidia-smi, flashlab info
#     cputests   the CPU GoogleTest suites (the portable build must pass on this host too)
#     bench      flashlab bench: default shape, and the standard learning shape, beside the peers
#     learn_fwd  learn/run_gpu.sh (validation sweep, memcheck, racecheck, progression, SDPA, ncu)
#     learn_bwd  learn/run_gpu_backward.sh (the same for the backward)
#     sm80       the production CuTe kernels: GPU test sweeps (tests/gpu), compute-sanitizer memcheck
#                and racecheck on a small sweep, a checked flashlab bench beside learn_v4
#     grid       benchmarks/sdpa_grid.py: cuda_sm80 vs PyTorch SDPA flash on the issue-4 grid
#     profile    ncu on cuda_sm80's kernels and SDPA flash's (FlashAttention-2) at one shape (bf16,
#                b4 s4096 h16 d128, causal and not; PROFILE_SHAPES / PROFILE_CAUSAL change them):
#                time, instructions, predication, tensor-pipe
#                use, atomics, spills, stall reasons side by side (tools/ncu_table.py -> ncu_table.md)
#     sass       ncu source counters of cuda_sm80's forward and backward kernels as per-SASS-line CSV
#     (GRID_ARGS adds options to the grid, e.g. "--hdims 128 --no-backward")
# LEARN_PHASES narrows the learn scripts' phases (e.g. validate,memcheck,racecheck,time,sdpa).
set -uo pipefail
cd "$(dirname "$0")/.."
PHASES=${1:-info,cputests,bench,learn_fwd,learn_bwd}
OUT=${OUT:-out-gpu}
mkdir -p "$OUT"
BIN=$PWD/build-carry/bin
export LD_LIBRARY_PATH="$PWD/build-carry/lib:$BIN:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}  # Debian's OpenBLAS misdetects the host CPU
export PYTHONUNBUFFERED=1
cp build-carry/lib/libflashlab.so "$BIN/" 2>/dev/null || true
has() { [[ ",$PHASES," == *",$1,"* ]]; }
summary=()
note() { summary+=("$1"); echo "## $1"; }

if has info; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
  "$BIN/flashlab" info | tee "$OUT/info.txt"
fi
if has cputests; then
  fails=0
  for t in "$BIN"/test_*; do
    "$t" --gtest_brief=1 >"$OUT/cputest_$(basename "$t").log" 2>&1 || { fails=$((fails + 1)); echo "FAILED: $t"; }
  done
  note "cpu tests: $fails failing executables"
fi
if has bench; then
  timeout 300 "$BIN/flashlab" bench 2>&1 | tee "$OUT/bench_default.txt"
  note "bench default rc=${PIPESTATUS[0]}"
  # The learning-path standard shape (bf16, hdim 128, 16 heads, 16k tokens), GPU impls only.
  for causal in "" "--causal"; do
    timeout 300 "$BIN/flashlab" bench --batch 4 --heads 16 --seqlen 4096 --head-dim 128 --backward $causal \
      --impl learn_v4,learn_v3,learn_v2,learn_v0 --iters 20 2>&1 | tee -a "$OUT/bench_4k.txt"
    note "bench 4k $causal rc=${PIPESTATUS[0]}"
  done
fi
if has learn_fwd; then
  OUT=$OUT/fwd bash learn/run_gpu.sh "$BIN" ${LEARN_PHASES:-} 2>&1 | tail -40 | tee "$OUT/learn_fwd_summary.txt"
fi
if has learn_bwd; then
  OUT=$OUT/bwd bash learn/run_gpu_backward.sh "$BIN" ${LEARN_PHASES:-} 2>&1 | tail -40 | tee "$OUT/learn_bwd_summary.txt"
fi
if has sm80; then
  for t in "$BIN"/test_sm80_* "$BIN"/test_cuda_*; do
    name=$(basename "$t")
    timeout ${SM80_TEST_TIMEOUT:-400} "$t" --gtest_brief=1 >"$OUT/$name.log" 2>&1
    note "$name rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$OUT/$name.log" | tr '\n' ' ')"
    grep -E '^\[  FAILED|Failure|^\[ sweep ' "$OUT/$name.log" | head -20
  done
  # Sanitizers on a small sweep (seqlens up to a few hundred keep them to seconds).
  for t in "$BIN"/test_cuda_forward "$BIN"/test_cuda_backward; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    for tool in memcheck racecheck; do
      FLASHLAB_SM80_SWEEP=40 FLASHLAB_SM80_BWD_SWEEP=24 FLASHLAB_SM80_MAX_SEQLEN=300 timeout ${SANITIZER_TIMEOUT:-300} \
        compute-sanitizer --tool $tool --error-exitcode 9 "$t" --gtest_brief=1 --gtest_filter='*Sweep*' \
        >"$OUT/${name}_$tool.log" 2>&1
      note "$name $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/${name}_$tool.log" | tail -1)"
    done
  done
  timeout 300 "$BIN/flashlab" bench --batch 4 --heads 16 --seqlen 4096 --head-dim 128 --impl cuda_sm80,learn_v4 \
    --iters 20 2>&1 | tee "$OUT/bench_sm80.txt"
  note "bench sm80 rc=${PIPESTATUS[0]}"
fi
if has grid; then
  timeout 580 python3 benchmarks/sdpa_grid.py --flashlab "$BIN/flashlab" --impl cuda_sm80,learn_v4 \
    --md "$OUT/grid.md" ${GRID_ARGS:-} 2>&1 | tee "$OUT/grid.log" | grep -v '^|'
  note "grid rc=${PIPESTATUS[0]}"
fi
if has profile; then
  # One launch of each kernel, flashlab's (cuda_sm80) and the peer's (SDPA flash = FlashAttention-2)
  # at the same shape, with the same metrics: where the time goes, side by side. Stall reasons are
  # per issued instruction (the "warp cycles per issued instruction" split by cause).
  metrics="gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size,launch__block_size"
  metrics+=",smsp__inst_executed.sum,smsp__thread_inst_executed_pred_on.sum,smsp__thread_inst_executed.sum"
  metrics+=",sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed"
  metrics+=",l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__sass_inst_executed_op_global_red.sum"
  metrics+=",l1tex__t_requests_pipe_lsu_mem_global_op_red.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum"
  metrics+=",smsp__sass_inst_executed_op_local_ld.sum,smsp__sass_inst_executed_op_local_st.sum"
  metrics+=",smsp__sass_inst_executed_op_shared_ld.sum,smsp__sass_inst_executed_op_shared_st.sum,smsp__sass_inst_executed_op_ldsm.sum"
  metrics+=",lts__t_sectors_op_red.sum,dram__bytes.sum"
  metrics+=",regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio"
  # PROFILE_SHAPES: ';'-separated shapes (default the one above); PROFILE_CAUSAL: "both", "0", "1".
  IFS=';' read -ra shapes <<<"${PROFILE_SHAPES:---batch 4 --heads 16 --seqlen 4096 --head-dim 128}"
  causals=("" "--causal")
  [ "${PROFILE_CAUSAL:-both}" = 0 ] && causals=("")
  [ "${PROFILE_CAUSAL:-both}" = 1 ] && causals=("--causal")
  files=()
  for shape in "${shapes[@]}"; do
    stag=$(echo "$shape" | sed -E 's/--batch ([0-9]+) --heads ([0-9]+) --seqlen ([0-9]+) --head-dim ([0-9]+)/b\1h\2s\3d\4/')
    for causal in "${causals[@]}"; do
      tag=${stag}_full; [ -n "$causal" ] && tag=${stag}_causal
      timeout 240 ncu --metrics "$metrics" -k 'regex:flash_(fwd|bwd)|bwd_(preprocess|convert)' -c 8 \
        "$BIN/flashlab" bench --impl cuda_sm80 $shape $causal --backward --warmup 0 --iters 1 --no-check \
        --no-sgemm --quiet >"$OUT/ncu_flashlab_$tag.txt" 2>&1
      note "ncu flashlab $tag rc=$?"
      timeout 240 ncu --metrics "$metrics" -k 'regex:flash|dot_do_o|convert_dq' -c 8 \
        python3 benchmarks/sdpa_flash_once.py $shape $causal >"$OUT/ncu_sdpa_$tag.txt" 2>&1
      note "ncu sdpa flash $tag rc=$?"
      files+=("$OUT/ncu_flashlab_$tag.txt" "$OUT/ncu_sdpa_$tag.txt")
    done
  done
  python3 tools/ncu_table.py "${files[@]}" | tee "$OUT/ncu_table.md"
fi
if has sass; then
  # Per-instruction view of flashlab's main forward and backward kernels (b4 s4096 h16 d128, bf16):
  # executed instructions and stall samples per SASS line, as CSV (tools/sass_hotspots.py reads it).
  for pass in forward backward; do
    extra=""; kern='regex:flash_fwd_kernel'
    [ $pass = backward ] && { extra="--backward"; kern='regex:flash_bwd_kernel'; }
    timeout 240 ncu --section SourceCounters --section WarpStateStats -k "$kern" -c 1 -f -o "$OUT/sass_$pass" \
      "$BIN/flashlab" bench --impl cuda_sm80 --batch 4 --heads 16 --seqlen 4096 --head-dim 128 $extra \
      --warmup 0 --iters 1 --no-check --no-sgemm --quiet >"$OUT/sass_$pass.log" 2>&1
    ncu --import "$OUT/sass_$pass.ncu-rep" --page source --csv --print-source sass >"$OUT/sass_$pass.csv" 2>>"$OUT/sass_$pass.log"
    note "sass $pass rc=$? $(wc -l <"$OUT/sass_$pass.csv") lines"
    rm -f "$OUT/sass_$pass.ncu-rep"
  done
fi
echo "==== summary"
printf '%s\n' "${summary[@]}"
