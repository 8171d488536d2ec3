#!/usr/bin/env bash
# tools/build.sh — set up (idempotent) and build flashlab into ./build. Everything it prints goes to
# stderr, so `tools/bench.sh --json` keeps stdout for the JSON.
#
# CPU only or CUDA, decided in this order:
#   1. asked for: FLASHLAB_CUDA=ON|OFF|AUTO in the environment, --cuda / --cpu here, or
#      -DFLASHLAB_CUDA=... among the CMake arguments;
#   2. CI=true: AUTO (CUDA when nvcc is found: CI's compile check) with a reduced instantiation set;
#   3. an existing build/CMakeCache.txt keeps its choice, so tools/bench.sh and tools/test.sh build
#      the same thing (the preset's FLASHLAB_CUDA=AUTO is applied to a fresh build folder only);
#   4. otherwise CUDA only when a GPU is present (nvidia-smi -L succeeds or /dev/nvidia0 exists) and
#      nvcc is found: without a GPU the CUDA kernels cannot run here, and compiling all of them
#      takes ~20 min on 2 cores.
# Architectures of a CUDA build: FLASHLAB_CUDA_ARCHS=all (every supported one: 80;90a), a list such
# as "90a" or "80;90a", or by default the GPU present (compute capability 9.0 -> 90a, 8.x -> 8x),
# all when no GPU can be queried. A build folder keeps its architectures until asked otherwise.
# Other arguments go to the CMake configure step (e.g. -DFLASHLAB_HEAD_DIMS=128).
set -euo pipefail
cd "$(dirname "$0")/.."
exec 1>&2

log() { printf '[build] %s\n' "$*"; }
now() { date +%s; }
elapsed() { local s=$(($(now) - $1)); printf '%d min %02d s' $((s / 60)) $((s % 60)); }

cuda_req="${FLASHLAB_CUDA:-}"
cmake_args=()
for a in "$@"; do
  case "$a" in
    --cuda) cuda_req=ON ;;
    --cpu) cuda_req=OFF ;;
    -DFLASHLAB_CUDA=*) cuda_req="${a#-DFLASHLAB_CUDA=}" ;;
    *) cmake_args+=("$a") ;;
  esac
done
cuda_req="${cuda_req^^}"
case "$cuda_req" in ""|ON|OFF|AUTO) ;; *) log "FLASHLAB_CUDA must be ON, OFF or AUTO (got '$cuda_req')"; exit 2 ;; esac

t0=$(now)
bash tools/setup.sh

gpu_present() {
  { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; } || [ -e /dev/nvidia0 ]
}
# CUDA architectures of the GPUs present, e.g. "90a" or "80;86"; empty when they cannot be queried.
gpu_archs() {
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' ' |
    while read -r cc; do
      case "$cc" in
        9.0) echo 90a ;;
        [0-9]*.[0-9]*) echo "${cc/./}" ;;
      esac
    done | sort -u | paste -sd';' -
}
have_nvcc() { command -v nvcc >/dev/null 2>&1; }
cache=build/CMakeCache.txt
cached() { sed -n "s/^$1:[A-Z]*=//p" "$cache" 2>/dev/null; }

# ---- CPU or CUDA
cuda="" archs="" why=""
if [ -n "$cuda_req" ]; then
  cuda=$cuda_req why="asked for (FLASHLAB_CUDA / --cuda / --cpu)"
elif [[ "${CI:-}" == "true" ]]; then
  cuda=AUTO why="CI: CUDA compile check when nvcc is found"
elif [ -f "$cache" ] && [ -n "$(cached FLASHLAB_CUDA)" ]; then
  why="kept from $cache; FLASHLAB_CUDA=ON or OFF changes it"
elif gpu_present; then
  if have_nvcc; then cuda=ON why="a GPU is present"; else cuda=OFF why="a GPU is present but nvcc is not found"; fi
else
  cuda=OFF why="no GPU found; FLASHLAB_CUDA=ON builds the CUDA code anyway"
fi
# Architectures: asked for, else the GPU present when the CUDA choice is made now.
case "${FLASHLAB_CUDA_ARCHS:-}" in
  "") if [ "$cuda" = ON ] && gpu_present; then archs=$(gpu_archs); fi ;;
  all|ALL) archs="80;90a" ;;
  *) archs=$FLASHLAB_CUDA_ARCHS ;;
esac

if [ -n "$cuda" ]; then cmake_args=(-DFLASHLAB_CUDA="$cuda" "${cmake_args[@]}"); fi
if [ -n "$archs" ]; then cmake_args=(-DFLASHLAB_CUDA_ARCHS="$archs" "${cmake_args[@]}"); fi
# A CUDA build needs the CuTe headers (tools/setup.sh installs them): fail early if they are missing.
if have_nvcc; then cmake_args=(-DFLASHLAB_REQUIRE_CUTLASS=ON "${cmake_args[@]}"); fi
# CI (CI=true) compiles a reduced set of the cuda_sm80 instantiations: all 12 add ~12 min of nvcc
# (about 6 on 2 cores). 128 and 192 cover both warp layouts (1 and 2 MMA row tiles per warp).
if [[ "${CI:-}" == "true" ]]; then cmake_args+=(-DFLASHLAB_HEAD_DIMS="128;192" -DFLASHLAB_DTYPES=bf16); fi

# ---- configure: the preset on a fresh folder; afterwards the folder's cache, plus what was asked
t=$(now)
if [ -f "$cache" ]; then
  configure=(cmake -S . -B build "${cmake_args[@]}")
else
  configure=(cmake --preset default "${cmake_args[@]}")
fi
log "configure: ${configure[*]}"
if ! "${configure[@]}" > "${TMPDIR:-/tmp}/flashlab-configure.$$.log" 2>&1; then
  cat "${TMPDIR:-/tmp}/flashlab-configure.$$.log"
  rm -f "${TMPDIR:-/tmp}/flashlab-configure.$$.log"
  log "configure failed (its output is above)"
  exit 1
fi
mv "${TMPDIR:-/tmp}/flashlab-configure.$$.log" build/configure.log
with_cuda=$(sed -n 's/^-- flashlab: CUDA \([0-9.]*\), archs \(.*\)/CUDA \1 for \2/p' build/configure.log)
log "configured in $(elapsed "$t"): ${with_cuda:-CPU only} (FLASHLAB_CUDA=$(cached FLASHLAB_CUDA): $why)"

# ---- build, with an estimate from what is left to compile
cores=$(nproc)
# What is left to compile: the compiler command lines of a dry run (make -n / ninja -n -v).
if [ -f build/build.ninja ]; then dry=(ninja -C build -n -v); else dry=(make -n -C build); fi
estimate=$("${dry[@]}" 2>/dev/null | .venv/bin/python -c '
import re, sys
cores = int(sys.argv[1])
n = n_cu = 0
secs = 0.0
seen = set()
for line in sys.stdin:
    m = re.search(r"\s-c\s+(\S+)", line)
    if not m or m.group(1) in seen:
        continue
    seen.add(m.group(1))
    n += 1
    if m.group(1).endswith(".cu"):
        n_cu += 1
        archs = max(1, line.count("-gencode"))
        # nvcc on one core, per architecture (docs/cuda-kernels.md): a forward instantiation
        # ~50 s, a backward one ~90 s, other CUDA files ~15 s.
        f = m.group(1)
        secs += archs * (90 if "/instantiations/bwd" in f else 50 if "/instantiations/" in f else 15)
    else:
        secs += 4
mins = secs / cores / 60
print(n, n_cu, "under a minute" if mins < 1 else "about %d min" % round(mins))
' "$cores" || true)
read -r n n_cu eta <<< "${estimate:-0 0 ?}"
t=$(now)
if [ "${n:-0}" -gt 0 ]; then
  log "compiling $n sources ($n_cu CUDA), $eta on $cores cores"
else
  log "nothing new to compile"
fi
cmake --build build -j"$cores"
log "built in $(elapsed "$t") (set-up, configure and build: $(elapsed "$t0"))"
