#!/usr/bin/env bash
# CUDA compiler launcher that fails a compile when ptxas serializes wgmma (C7510-C7519) or ignores
# setmaxnreg (C7508). ptxas prints these as "info", so --warning-as-error does not catch them
# (checked with tools/sm90_probe.sh's negative test, nvcc 13.0). Only sources under an sm90 folder
# are gated; every other command runs unchanged. Spills are errors by the sm90 sources' own flags
# (-Xptxas=-warn-spills,--warning-as-error).
# Wired in src/cuda/CMakeLists.txt (the CUDA compiler launcher of target flashlab):
#   set_property(TARGET flashlab PROPERTY CUDA_COMPILER_LAUNCHER .../cmake/ptxas_gate.sh)
# By hand: cmake/ptxas_gate.sh nvcc <flags> -c src/cuda/sm90/....cu -o out.o
set -uo pipefail
case " $* " in
  */sm90/* | */sm90_probe/*) ;;
  *) exec "$@" ;;
esac
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" 2>"$log"
rc=$?
cat "$log" >&2
[ "$rc" -eq 0 ] || exit "$rc"
if grep -qE '\(C75(08|1[0-9])\)' "$log"; then
  obj=""
  prev=""
  for a in "$@"; do
    [ "$prev" = "-o" ] && obj=$a
    prev=$a
  done
  [ -n "$obj" ] && rm -f "$obj"  # no object: the next build retries instead of linking it
  echo "ptxas_gate: ptxas serialized wgmma or ignored setmaxnreg (the C75xx lines above) in an sm90" \
       "kernel: see docs/design/sm90-forward.md §9" >&2
  exit 1
fi
exit 0
