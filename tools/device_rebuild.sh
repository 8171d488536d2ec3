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
# Buckets not built are reported by the library as "not compiled into this build" (tests skip them).
set -euo pipefail
cd "$(dirname "$0")/.."
HEAD_DIMS=${HEAD_DIMS:-32;64;96;128;192;256}
DTYPES=${DTYPES:-bf16;fp16}
inc=/tmp/flashlab-cutlass
if [ ! -f "$inc/cute/tensor.hpp" ]; then
  mkdir -p "$inc"
  tar -xJf build-carry/cutlass-include.tar.xz -C "$inc"
fi
t0=$(date +%s)
cmake -S . -B /tmp/flashlab-rebuild -DCMAKE_BUILD_TYPE=Release -DFLASHLAB_CUDA=ON -DFLASHLAB_CUDA_ARCHS=90a \
  -DFLASHLAB_CPU_ARCH=x86-64-v3 -DFLASHLAB_BUILD_TESTS=OFF -DFLASHLAB_BUILD_CLI=OFF \
  -DFLASHLAB_REQUIRE_CUTLASS=ON -DFLASHLAB_CUTLASS_INCLUDE="$inc" \
  "-DFLASHLAB_HEAD_DIMS=$HEAD_DIMS" "-DFLASHLAB_DTYPES=$DTYPES" >/tmp/flashlab-rebuild.log 2>&1 ||
  { tail -20 /tmp/flashlab-rebuild.log; exit 1; }
cmake --build /tmp/flashlab-rebuild -j"$(nproc)" --target flashlab >>/tmp/flashlab-rebuild.log 2>&1 ||
  { grep -E "error" /tmp/flashlab-rebuild.log | head -20; exit 1; }
cp -L /tmp/flashlab-rebuild/libflashlab.so build-carry/lib/libflashlab.so
cp -L /tmp/flashlab-rebuild/libflashlab.so build-carry/bin/libflashlab.so 2>/dev/null || true
echo "device_rebuild: libflashlab.so (head dims $HEAD_DIMS; dtypes $DTYPES) in $(($(date +%s) - t0)) s"
