#!/usr/bin/env bash
# tools/test.sh — set up, build, and run the whole test suite with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
