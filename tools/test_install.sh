#!/usr/bin/env bash
# tools/test_install.sh [BUILD_DIR] — the C++ package as a user gets it: `cmake --install` an
# existing build (default ./build) into a temporary prefix, then configure, build and run
# examples/cpp_consumer against it with find_package(flashlab). Also checks that the README's C++
# snippet is the example's code. Works for CUDA and CPU-only builds: a CUDA build's package finds
# CUDA::cudart through find_dependency(CUDAToolkit); the example itself runs on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
if [ ! -f "$build/CMakeCache.txt" ]; then
  echo "test_install: $build is not a configured build folder (run tools/build.sh first)" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --build "$build" --target flashlab -j"$(nproc)" >/dev/null
cmake --install "$build" --prefix "$prefix" >/dev/null

# Only the public headers, libflashlab and the CMake package are installed.
unexpected=$(cd "$prefix" && find . -type f \
  ! -path './include/flashlab/*.h' ! -path './lib*/libflashlab.so' ! -path './lib*/cmake/flashlab/*.cmake')
if [ -n "$unexpected" ]; then
  echo "test_install: unexpected files installed:" >&2
  echo "$unexpected" >&2
  exit 1
fi

cmake -S examples/cpp_consumer -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/consumer" -j"$(nproc)" >/dev/null
"$tmp/consumer/flashlab_consumer"

# The README's C++ snippet is the example's code between its "README" markers (without the
# marker lines and the first two-space indentation).
snippet() { sed -n '/^  \/\/ ---- README begin$/,/^  \/\/ ---- README end$/p' examples/cpp_consumer/main.cpp |
  sed '1d;$d' | sed 's/^  //'; }
readme() { awk '/^```cpp$/{on=1; next} /^```$/{on=0} on' README.md | sed '/^#include/d;/^$/d'; }
if ! diff <(snippet) <(readme) >/dev/null; then
  echo "test_install: README.md's C++ snippet differs from examples/cpp_consumer/main.cpp:" >&2
  diff <(snippet) <(readme) >&2 || true
  exit 1
fi
echo "test_install: OK (installed from $build, consumer built with find_package(flashlab))"
