#!/usr/bin/env bash
# tools/test.sh — set up, build, and run the whole test suite: CTest, the installed C++ package
# (tools/test_install.sh), then pytest on python/tests.
# Arguments go to ctest (e.g. -R cli). The build is tools/build.sh's: CPU only unless a GPU is
# present or FLASHLAB_CUDA=ON is set; the build folder keeps the choice, so tools/bench.sh and this
# script build the same thing.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
# CI: the sm90 instantiations the reduced build skipped, through the same ptxas gate (spills,
# wgmma serialization), one file at a time; nothing to do in a CPU-only build.
if [[ "${CI:-}" == "true" ]]; then bash tools/ptxas_check.sh build; fi
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"

# The C++ package: cmake --install ./build into a temporary prefix, then examples/cpp_consumer
# built against it with find_package(flashlab) and run (a CPU forward checked against a naive one).
bash tools/test_install.sh build

# The Python package (python/), built against ./build with .venv's Python (scikit-build-core and
# nanobind from .venv), then its tests: the NumPy CPU path runs here, the torch tests where .venv has
# torch (CI: tools/setup.sh installs it), GPU tests skip without a GPU. pytest's exit code 5 (no
# tests collected) is not a failure.
t=$(date +%s)
echo "[test] building and installing the Python package (python/, about 20 s)" >&2
.venv/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps ./python
echo "[test] Python package installed in $(($(date +%s) - t)) s" >&2
rc=0
.venv/bin/python -m pytest -q python/tests || rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then exit "$rc"; fi

# The learning exercises (learn/check.py, docs/learn/exercises.md; NumPy, and torch + triton for the
# triton topic, which is skipped without them): every reference
# solution passes and every mutant is rejected, on fresh random inputs (the seed is printed).
# Two commands, not one `a && b` list, so that set -e stops at either if more lines follow.
.venv/bin/python learn/check.py --solutions
.venv/bin/python learn/check.py --mutants
