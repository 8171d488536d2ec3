#!/usr/bin/env bash
# Compile-only check of the sm90 toolchain (TMA, wgmma SS/RS, PipelineTmaAsync, setmaxnreg) with the
# pinned CUTLASS/CuTe headers: builds src/cuda/sm90_probe/tma_gmma_probe.cu for sm_90a (no GPU
# needed), prints ptxas's resource report, and fails on spills, an ignored setmaxnreg (C7508) or a
# serialized wgmma or compiler-injected wgmma fences (C7510-C7519). Not part of the library build or CI.
#   tools/sm90_probe.sh [CUTLASS_INCLUDE]   (default: .deps/cutlass/... of the main checkout)
#   SM90_PROBE_FLAGS=-DFLASHLAB_PROBE_SERIALIZE tools/sm90_probe.sh   negative test: must FAIL (C751x)
# Takes a few minutes and several GB of host memory: run one nvcc at a time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
inc=${1:-${FLASHLAB_CUTLASS_INCLUDE:-$root/.deps/cutlass/cutlass_library/source/include}}
[ -d "$inc/cute" ] || inc=/work/main/.deps/cutlass/cutlass_library/source/include
[ -d "$inc/cute" ] || { echo "sm90_probe: CuTe headers not found (pass the include dir)" >&2; exit 2; }
out=${TMPDIR:-/tmp}/flashlab_sm90_probe
mkdir -p "$out"
log=$out/ptxas.log
# -gencode, not -arch=sm_90a: with nvcc 13.0 the shorthand can also run a plain sm_90 pass that
# rejects wgmma / setmaxnreg (.library/device/HOPPER.md).
set +e
nvcc -std=c++17 -O3 --expt-relaxed-constexpr -I"$inc" -I"$root/src" -I"$root/include" \
  -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -Xptxas -warn-spills -Xptxas -warn-lmem-usage \
  -DNDEBUG ${SM90_PROBE_FLAGS:-} -keep -keep-dir "$out" -c "$root/src/cuda/sm90_probe/tma_gmma_probe.cu" -o "$out/tma_gmma_probe.o" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || { echo "sm90_probe: nvcc failed (rc $rc)" >&2; exit "$rc"; }
bad=0
if grep -E 'C75(08|1[0-9])' "$log"; then echo "sm90_probe: FAIL: setmaxnreg ignored or wgmma serialized" >&2; bad=1; fi
if grep -E '[1-9][0-9]* bytes spill (stores|loads)' "$log"; then echo "sm90_probe: FAIL: spills" >&2; bad=1; fi
if grep -Ei 'local memory|lmem' "$log" | grep -v ' 0 bytes'; then echo "sm90_probe: FAIL: local memory" >&2; bad=1; fi
# The instructions the probe exists for, counted in the PTX that ptxas assembled (the toolkit here
# has no cuobjdump/nvdisasm for the SASS; on a machine that has them, look for HGMMA, UTMALDG,
# USETMAXREG in `cuobjdump -sass`).
ptx=$(ls "$out"/*.ptx | head -n1)
for ins in 'cp.async.bulk.tensor' 'wgmma.mma_async' 'wgmma.fence' 'wgmma.commit_group' 'wgmma.wait_group' \
           'setmaxnreg.inc' 'setmaxnreg.dec' 'mbarrier.try_wait' 'mbarrier.arrive.expect_tx' 'prefetch.tensormap'; do
  n=$(grep -c -F "$ins" "$ptx" || true)
  printf 'sm90_probe: ptx %-28s %s\n' "$ins" "$n"
  [ "$n" -gt 0 ] || { echo "sm90_probe: FAIL: no $ins in the PTX" >&2; bad=1; }
done
[ "$bad" -eq 0 ] && echo "sm90_probe: OK (no spills, no C7508/C751x)"
exit "$bad"
