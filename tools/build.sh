#!/usr/bin/env bash
# tools/build.sh — set up (idempotent) and build flashlab into ./build.
# CUDA targets (learning kernels, CuTe check) are built when nvcc is found; then the CuTe headers
# are required. Extra arguments go to the CMake configure step (e.g. -DFLASHLAB_CUDA=OFF).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
extra=()
if command -v nvcc >/dev/null 2>&1; then extra+=(-DFLASHLAB_REQUIRE_CUTLASS=ON); fi
# CI (CI=true) compiles a reduced set of the cuda_sm80 instantiations: all 12 add ~12 min of nvcc
# (about 6 on 2 cores). 128 and 192 cover both warp layouts (1 and 2 MMA row tiles per warp).
if [[ "${CI:-}" == "true" ]]; then extra+=(-DFLASHLAB_HEAD_DIMS="128;192" -DFLASHLAB_DTYPES=bf16); fi
cmake --preset default "${extra[@]}" "$@" >/dev/null
cmake --build build -j"$(nproc)"
