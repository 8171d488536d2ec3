#!/usr/bin/env bash
# tools/bench.sh — the main job: set up, build, and run `flashlab bench` (CPU when no GPU is present).
# Arguments are passed to `flashlab bench`, e.g.  bash tools/bench.sh --seqlen 2048 --head-dim 64
# CPU or CUDA build: FLASHLAB_CUDA=ON|OFF in the environment (default: CUDA only when a GPU is
# present; a build folder keeps its choice), FLASHLAB_CUDA_ARCHS=all for every architecture
# (tools/build.sh). Set-up and build print to stderr: stdout is the bench's alone, so
#   bash tools/bench.sh --json > r.json
# writes valid JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh >&2
exec ./build/src/cli/flashlab bench "$@"
