#!/usr/bin/env bash
# tools/device_ab.sh — ON the GPU machine: A/B kernel variants in one call, peers in the same runs.
#
# A is the carried library (build-carry/lib, from tools/device_bundle.sh). Each variant is the
# current source tree rebuilt on the device with extra defines (tools/device_rebuild.sh with
# CUDAFLAGS; guard the experiment in the code with #ifdef), one head dim / dtype set for speed.
# Then benchmarks/sdpa_grid.py runs for A and every variant, REPS times, interleaved so drift hits
# all alike. Read the log with `python3 tools/ab_table.py LOG` (own milliseconds side by side).
#
#   VARIANTS="1=-DFLASHLAB_EXP_X;2=-DFLASHLAB_EXP_X -DFLASHLAB_EXP_Y" HEAD_DIMS=128 \
#     SEQLENS=2048,8192 REPS="1 2" bash tools/device_ab.sh > $OUT/ab.txt 2>&1
#
# HEAD_DIMS (';'-separated, default 128) and DTYPES (default bf16) are built; GRID_HDIMS (default
# HEAD_DIMS) are timed. A variant whose defines change nothing (e.g. "B=-DNONE") is the current
# source against the carried build.
set -uo pipefail
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/build-carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX} PYTHONUNBUFFERED=1
HEAD_DIMS=${HEAD_DIMS:-128}
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
IFS=';' read -ra VS <<<"${VARIANTS:?VARIANTS=\"name=defines;...\"}"
names=(A)
mkdir -p /tmp/ab-libA && cp -L build-carry/lib/libflashlab.so /tmp/ab-libA/
for v in "${VS[@]}"; do
  name=${v%%=*}
  names+=("$name")
  CUDAFLAGS="${v#*=}" BUILD_DIR=/tmp/ab-build-$name DEST=/tmp/ab-lib$name HEAD_DIMS=$HEAD_DIMS \
    DTYPES=${DTYPES:-bf16} bash tools/device_rebuild.sh || exit 1
done
for rep in ${REPS:-1 2}; do
  for name in "${names[@]}"; do
    echo "=== variant $name rep $rep"
    LD_LIBRARY_PATH=/tmp/ab-lib$name:$LD_LIBRARY_PATH python3 benchmarks/sdpa_grid.py \
      --flashlab build-carry/bin/flashlab --impl cuda_sm80 --hdims "${GRID_HDIMS:-${HEAD_DIMS//;/,}}" \
      --seqlens "${SEQLENS:-2048,8192}" --iters 10 2>&1 | grep -E "^\| [0-9]|median"
  done
done
