#!/usr/bin/env bash
# tools/build.sh — set up (idempotent) and build flashlab into ./build.
# CUDA targets (learning kernels, CuTe check) are built when nvcc is found; then the CuTe headers
# are required. Extra arguments go to the CMake configure step (e.g. -DFLASHLAB_CUDA=OFF).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
extra=()
if command -v nvcc >/dev/null 2>&1; then extra+=(-DFLASHLAB_REQUIRE_CUTLASS=ON); fi
cmake --preset default "${extra[@]}" "$@" >/dev/null
cmake --build build -j"$(nproc)"
