#!/usr/bin/env bash
# tools/setup.sh — idempotent set-up from a fresh clone. Safe to run again: each step checks first.
#   1. Debian packages: compilers, CMake, GoogleTest, OpenBLAS (the CPU sgemm peer in the benchmark)
#   2. Python packages into a project-local virtual environment (.venv)
#   3. CUTLASS/CuTe headers from the pinned PyPI package nvidia-cutlass, into .deps/cutlass
#      (installed without its Python dependencies: we only need the headers)
#   4. torch, pinned, into .venv, for the torch-dependent Python tests on the CPU: in CI (CI=true)
#      and when FLASHLAB_TORCH=1; FLASHLAB_TORCH=0 skips it. PyPI's Linux wheel brings its CUDA
#      libraries along (about 4.7 GB; 70 s on this machine): it is not part of a plain set-up.
# Everything it prints goes to stderr (stdout stays free for tools/bench.sh --json). Steps that take
# more than a few seconds say so before they start and report their time after.
set -euo pipefail
cd "$(dirname "$0")/.."
exec 1>&2

CUTLASS_VERSION=4.2.0.0   # newest nvidia-cutlass release; builds with nvcc 13.0
TORCH_VERSION=2.11.0      # the GPU machine's torch (docs/python.md)
APT_PACKAGES=(cmake g++ make libgtest-dev libopenblas-dev python3-venv)
PY_PACKAGES=(numpy==2.2.6 pytest==8.4.2 nanobind==2.9.2 scikit-build-core==0.11.6)  # last two: python/

log() { printf '[setup] %s\n' "$*"; }
t_start=$(date +%s)
took() { printf '%d s' $(($(date +%s) - t_start)); }

# ---- 1. Debian packages
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]} (apt-get; about 1-3 min)"
  t_start=$(date +%s)
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  log "Debian packages installed in $(took)"
else
  log "Debian packages present"
fi

# ---- 2. Python virtual environment
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import numpy, pytest, nanobind, scikit_build_core" >/dev/null 2>&1; then
  log "installing Python packages: ${PY_PACKAGES[*]} (pip; about 1 min)"
  t_start=$(date +%s)
  .venv/bin/python -m pip install -q --disable-pip-version-check "${PY_PACKAGES[@]}"
  log "Python packages installed in $(took)"
else
  log "Python packages present"
fi

# ---- 3. CUTLASS / CuTe headers
stamp=.deps/cutlass/.version
if [ "$(cat "$stamp" 2>/dev/null)" != "$CUTLASS_VERSION" ]; then
  log "installing nvidia-cutlass==$CUTLASS_VERSION headers into .deps/cutlass (pip; about 30 s)"
  t_start=$(date +%s)
  rm -rf .deps/cutlass
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps \
    --target .deps/cutlass "nvidia-cutlass==$CUTLASS_VERSION"
  test -f .deps/cutlass/cutlass_library/source/include/cute/tensor.hpp
  echo "$CUTLASS_VERSION" > "$stamp"
  log "CUTLASS headers installed in $(took)"
else
  log "CUTLASS $CUTLASS_VERSION present"
fi

# ---- 4. torch (CI, or FLASHLAB_TORCH=1)
want_torch=${FLASHLAB_TORCH:-}
[ -z "$want_torch" ] && [ "${CI:-}" = "true" ] && want_torch=1
if [ "$want_torch" = "1" ]; then
  if .venv/bin/python -c "import sys, torch; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" \
      >/dev/null 2>&1; then
    log "torch $TORCH_VERSION present"
  else
    log "installing torch==$TORCH_VERSION (pip; about 4.7 GB with its CUDA libraries, 1-3 min)"
    t_start=$(date +%s)
    .venv/bin/python -m pip install -q --disable-pip-version-check "torch==$TORCH_VERSION"
    log "torch installed in $(took)"
  fi
fi
log "done"
