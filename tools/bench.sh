#!/usr/bin/env bash
# tools/bench.sh — the main job: set up, build, and run `flashlab bench` (CPU when no GPU is present).
# Arguments are passed to `flashlab bench`, e.g.  bash tools/bench.sh --seqlen 2048 --head-dim 64
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
exec ./build/src/cli/flashlab bench "$@"
