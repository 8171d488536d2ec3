#!/usr/bin/env bash
# tools/decode_split_sweep.sh — ON the GPU machine (build-carry/ carried): `flashlab bench --decode`
# on cuda_sm80 over cache lengths and forced key splits (--splits; 0 = the library's auto choice),
# one line per run as it finishes. The data behind decode.cu's auto split rule (docs/perf.md, "Decode").
#   bash tools/decode_split_sweep.sh [shapes|batch1|paged|auto|all]   (default all; auto: only the
#   library's own choices (splits, row groups) at the shapes of docs/perf.md's decode tables, for a
#   re-check after a change of a rule)
set -uo pipefail
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/build-carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
F=build-carry/bin/flashlab
WHAT=${1:-all}
run() {
  timeout 60 "$F" bench --decode --impl cuda_sm80 --head-dim 128 --iters 20 --no-check --quiet "$@" 2>&1 |
    grep -E "^cuda|error" | sed "s|^|$* : |"
}
if [[ $WHAT == all || $WHAT == shapes ]]; then
  for L in 1024 4096 16384 65536; do
    for s in 0 1 2 4; do run --batch 32 --heads 32 --heads-kv 8 --cache-len $L --splits $s; done
  done
fi
if [[ $WHAT == all || $WHAT == batch1 ]]; then
  for s in 0 12 16 32; do run --batch 1 --heads 32 --heads-kv 8 --cache-len 131072 --splits $s; done
  for s in 0 4 8; do run --batch 4 --heads 32 --heads-kv 8 --cache-len 8192 --splits $s; done
  for s in 0 1 2; do run --batch 16 --heads 32 --heads-kv 8 --cache-len 4096 --splits $s; done
fi
if [[ $WHAT == auto ]]; then
  for L in 1024 4096 16384 65536; do run --batch 32 --heads 32 --heads-kv 8 --cache-len $L; done
  run --batch 1 --heads 32 --heads-kv 8 --cache-len 131072
  run --batch 4 --heads 32 --heads-kv 8 --cache-len 8192
  run --batch 64 --heads 32 --heads-kv 4 --cache-len 1024
  run --batch 32 --heads 64 --heads-kv 8 --cache-len 8192 --seqlen 4
  # more query rows per kv head than one 16-row chunk: the row-group rule (decode.cu tile_row_groups)
  run --batch 32 --heads 64 --heads-kv 8 --cache-len 8192 --seqlen 8
  run --batch 32 --heads 64 --heads-kv 8 --cache-len 8192 --seqlen 16
  run --batch 32 --heads 32 --heads-kv 8 --cache-len 8192 --seqlen 8
  run --batch 32 --heads 32 --heads-kv 1 --cache-len 8192
  # paged caches
  run --batch 32 --heads 32 --heads-kv 8 --cache-len 4096 --page-size 16
  run --batch 32 --heads 32 --heads-kv 8 --cache-len 4096 --page-size 1
fi
if [[ $WHAT == all || $WHAT == paged ]]; then
  for P in 1 16 256; do run --batch 32 --heads 32 --heads-kv 8 --cache-len 4096 --page-size $P; done
fi
