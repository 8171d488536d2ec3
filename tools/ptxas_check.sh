#!/usr/bin/env bash
# tools/ptxas_check.sh [BUILD_DIR] — the sm90 ptxas gate for the head-dim buckets a reduced build
# did not compile: each Hopper instantiation (src/cuda/sm90/instantiations/*_DTYPE.cu) that is not in
# BUILD_DIR's compile_commands.json is compiled once with the flags of one that is, through
# cmake/ptxas_gate.sh (register spills are errors by those flags; wgmma serialization, C75xx, by
# the gate), and the object is thrown away.
#
# Why: CI builds the buckets 128 and 192 only, and a change to shared code once made the hdim-64
# forward spill 20 bytes, which only the device's full build found (session 13, docs/perf.md).
# One translation unit at a time: one nvcc of an sm90 attention file can take ~11 GB.
#   DTYPE (default bf16): the dtype whose files are checked (fp16 compiles the same kernels).
#   ONLY (a regex, default all): only the files whose names match, e.g. ONLY='fwd_hdim(64|256)'.
# Exit 0 when every file passes or there is nothing to check (no CUDA build, no sm90 in it).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
cc=$build/compile_commands.json
[ -f "$cc" ] || { echo "[ptxas] no $cc: nothing to check" >&2; exit 0; }
plan=$(python3 - "$cc" "${DTYPE:-bf16}" "${ONLY:-.}" <<'EOF'
import glob, json, os, re, shlex, sys
cc, dtype, only = json.load(open(sys.argv[1])), sys.argv[2], re.compile(sys.argv[3])
mine = [e for e in cc if "/src/cuda/sm90/instantiations/" in e["file"]]
if not mine:
    sys.exit(0)
built = {os.path.realpath(e["file"]) for e in mine}
ref = mine[0]
args = shlex.split(ref["command"])
src = args.index(ref["file"])
out = args.index("-o") + 1
root = ref["file"].split("/src/cuda/sm90/instantiations/")[0]
for f in sorted(glob.glob(f"{root}/src/cuda/sm90/instantiations/*_{dtype}.cu")):
    if os.path.realpath(f) in built or not only.search(os.path.basename(f)):
        continue
    a = list(args)
    a[src], a[out] = f, "@OBJ@"
    print(ref["directory"] + "\t" + shlex.join(a))
EOF
)
[ -n "$plan" ] || { echo "[ptxas] no sm90 instantiation left to check" >&2; exit 0; }
rc=0 root=$PWD obj=${TMPDIR:-/tmp}/ptxas_check.$$.o log=${TMPDIR:-/tmp}/ptxas_check.$$.log
while IFS=$'\t' read -r dir cmd; do
  name=$(basename "$(grep -o '[^ ]*/instantiations/[^ ]*\.cu' <<< "$cmd")")
  t=$(date +%s)
  if (cd "$dir" && eval bash "$root/cmake/ptxas_gate.sh" "${cmd//@OBJ@/$obj}") > "$log" 2>&1; then
    echo "[ptxas] $name: 0 spills, no C75xx ($(($(date +%s) - t)) s)" >&2
  else
    grep -E "error|C75|spill" "$log" | head -8 >&2
    echo "[ptxas] $name: FAILED (above)" >&2
    rc=1
  fi
done <<< "$plan"
rm -f "$log" "$obj"
exit $rc
