# learn/run_common.sh — the set-up learn/run_gpu.sh and learn/run_gpu_backward.sh share. Sourced,
# not run:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"
#   learn_setup <usage> <default-out> "$@"
#
# learn_setup reads the scripts' common command line (<bin-dir> [phases]) into BIN and PHASES,
# creates OUT (default: <default-out>), points LD_LIBRARY_PATH at <bin-dir> and a cuBLAS, sets
# SEQLENS, and records the GPU. Then each phase calls `has <phase>` / `note <summary line>`, and
# the script ends with `print_summary`.

# All phases, in the order they run when none are named.
ALL_PHASES=validate,memcheck,racecheck,time,sdpa,ncu
# The shared-memory counters of the ncu phase (bank conflicts, ldmatrix count, duration).
NCU_METRICS=l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,smsp__inst_executed_op_ldsm.sum,gpu__time_duration.sum

learn_setup() {
  local usage=$1 default_out=$2
  shift 2
  BIN=${1:?usage: $usage}
  PHASES=${2:-$ALL_PHASES}
  OUT=${OUT:-$default_out}
  mkdir -p "$OUT"
  # cuBLAS: the toolkit's, else the one PyTorch ships (nvidia-cublas wheel).
  TORCH_CUBLAS=$(python3 -c 'import nvidia.cublas as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null || true)
  export LD_LIBRARY_PATH="$BIN:/usr/local/cuda/lib64:${TORCH_CUBLAS}:${LD_LIBRARY_PATH:-}"
  export PYTHONUNBUFFERED=1
  SEQLENS=${SEQLENS:-2048,4096,8192,16384}
  summary=()
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
}

has() { [[ ",$PHASES," == *",$1,"* ]]; }
note() { summary+=("$1"); echo "## $1"; }

# ncu_bank_conflicts <program> <kernel regex> <summary grep regex> [command prefix, e.g. timeout 25]
# One launch each of v3 and v4 at seqlen 2048 (full attention) under ncu; logs ncu_v3.log, ncu_v4.log.
ncu_bank_conflicts() {
  local prog=$1 kernels=$2 keep=$3 v
  shift 3
  for v in 3 4; do
    "$@" ncu --metrics "$NCU_METRICS" -k "regex:$kernels" -c 1 \
      "$prog" "$v" --no-validate --seqlens 2048 --causal 0 --peak 1 >"$OUT/ncu_v$v.log" 2>&1
    note "ncu v$v rc=$? $(grep -E "$keep" "$OUT/ncu_v$v.log" | awk '{print $1"="$NF}' | tr '\n' ' ')"
  done
}

print_summary() {
  echo
  echo "==== summary"
  printf '%s\n' "${summary[@]}"
}
