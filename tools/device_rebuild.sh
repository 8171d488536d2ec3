#!/usr/bin/env bash
# tools/device_rebuild.sh — ON the GPU machine: rebuild libflashlab.so from the current sources with
# all 16 cores, and put it in build-carry/lib in place of the carried one.
#
# For kernel iterations: the programs in build-carry/bin (CLI, tests) link libflashlab.so
# dynamically, so a rebuilt library is all a kernel change needs. The device has nvcc and cmake but
# no CUTLASS: tools/device_bundle.sh packs the CuTe/CUTLASS headers into
# build-carry/cutlass-include.tar.xz (a few MiB instead of 27). Tests and the CLI are not built here
# (no GoogleTest / OpenBLAS on the device).
#
#   HEAD_DIMS="64;128;256" DTYPES=bf16 bash tools/device_rebuild.sh     (defaults: every bucket, both)
#   ARCHS="80;90a" (default 90a) compiles for more GPUs; BUILD_DIR (default /tmp/flashlab-rebuild)
#   set to a fresh folder times a build from scratch (the build-time figures in docs/perf.md).
#   DEST=/some/dir puts the library there instead of build-carry (tools/device_ab.sh's variants);
#   CUDAFLAGS (read by CMake when BUILD_DIR is new) adds defines, e.g. -DFLASHLAB_EXP_X.
# Buckets not built are reported by the library as "not compiled into this build" (tests skip them).
set -euo pipefail
cd "$(dirname "$0")/.."
HEAD_DIMS=${HEAD_DIMS:-32;64;96;128;192;256}
DTYPES=${DTYPES:-bf16;fp16}
ARCHS=${ARCHS:-90a}
B=${BUILD_DIR:-/tmp/flashlab-rebuild}
inc=/tmp/flashlab-cutlass
if [ ! -f "$inc/cute/tensor.hpp" ]; then
  mkdir -p "$inc"
  tar -xJf build-carry/cutlass-include.tar.xz -C "$inc"
fi
t0=$(date +%s)
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DFLASHLAB_CUDA=ON "-DFLASHLAB_CUDA_ARCHS=$ARCHS" \
  -DFLASHLAB_CPU_ARCH=x86-64-v3 -DFLASHLAB_BUILD_TESTS=OFF -DFLASHLAB_BUILD_CLI=OFF \
  -DFLASHLAB_REQUIRE_CUTLASS=ON -DFLASHLAB_CUTLASS_INCLUDE="$inc" \
  "-DFLASHLAB_HEAD_DIMS=$HEAD_DIMS" "-DFLASHLAB_DTYPES=$DTYPES" >"$B.log" 2>&1 ||
  { tail -20 "$B.log"; exit 1; }
cmake --build "$B" -j"$(nproc)" --target flashlab >>"$B.log" 2>&1 ||
  { grep -E "error" "$B.log" | head -20; exit 1; }
if [ -n "${DEST:-}" ]; then
  mkdir -p "$DEST" && cp -L "$B/libflashlab.so" "$DEST/libflashlab.so"
else
  cp -L "$B/libflashlab.so" build-carry/lib/libflashlab.so
  cp -L "$B/libflashlab.so" build-carry/bin/libflashlab.so 2>/dev/null || true
fi
echo "device_rebuild: libflashlab.so (head dims $HEAD_DIMS; dtypes $DTYPES; archs $ARCHS; $(nproc) jobs) in $(($(date +%s) - t0)) s -> ${DEST:-build-carry}"
