#!/usr/bin/env bash
# tools/device_bundle.sh — build here for the lent H100 and gather what it needs into build-carry/.
#
# The GPU machine has nvcc, PyTorch and compute-sanitizer but no GoogleTest, OpenBLAS or CUTLASS,
# and no network. So we build on this machine (same nvcc, x86-64) with portable CPU flags
# (preset h100: sm_90a, -march=x86-64-v3), then copy the programs and the non-system shared
# libraries they need into build-carry/{bin,lib} (git-ignored, < 64 MiB). Then call the device
# tool with carry ["build-carry"] and the command `bash tools/gpu_check.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
cmake --preset h100 -DFLASHLAB_REQUIRE_CUTLASS=ON >/dev/null
cmake --build build-h100 -j"$(nproc)"

rm -rf build-carry
mkdir -p build-carry/bin build-carry/lib
progs=(src/cli/flashlab learn/attention_forward learn/attention_backward)
for t in build-h100/tests/test_* build-h100/tests/gpu/test_*; do
  [ -x "$t" ] && [ -f "$t" ] && progs+=("${t#build-h100/}")
done
for p in "${progs[@]}"; do cp "build-h100/$p" build-carry/bin/; done
cp -L build-h100/libflashlab.so build-carry/lib/
# Shared libraries from Debian packages the device lacks (OpenBLAS and its Fortran runtime, libgomp).
for lib in $(ldd build-carry/bin/flashlab | awk '/=> \// {print $3}' | grep -E 'openblas|gfortran|quadmath|gomp'); do
  cp -L "$lib" build-carry/lib/
done
# Diagnostic for native crashes in Python processes (python/scripts/import_order_check.py).
cc -O1 -g -shared -fPIC -o build-carry/lib/crash_backtrace.so python/scripts/crash_backtrace.c
# Symbol tables are not needed there; stripping keeps the carry under the device's 64 MiB.
strip --strip-unneeded build-carry/lib/*.so* build-carry/bin/*
# CuTe/CUTLASS headers, compressed, for tools/device_rebuild.sh (kernel iterations built on the device).
inc=$(sed -n 's/^FLASHLAB_CUTLASS_INCLUDE:PATH=//p' build-h100/CMakeCache.txt)
tar -cJf build-carry/cutlass-include.tar.xz -C "$inc" cute cutlass
du -sh build-carry
