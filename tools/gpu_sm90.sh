#!/usr/bin/env bash
# tools/gpu_sm90.sh — one device call of the Hopper forward's iteration, ON the GPU machine from the
# repo root with build-carry/ carried (test_cuda_forward, test_cuda_kvcache and the CLI built here
# with -DFLASHLAB_CUDA_ARCHS=90a, stripped; build-carry/cutlass-include.tar.xz for the rebuild;
# tools/device_bundle.sh's libraries). Logs in $OUT.
#
#   bash tools/gpu_sm90.sh [phases]      (default rebuild,sweep,sanitize,bench)
#     rebuild   tools/device_rebuild.sh (HEAD_DIMS / DTYPES as there); the stripped library comes back
#               as $OUT/libflashlab.so.xz (carry it as build-carry/lib/libflashlab.so.xz next time)
#     sweep     a smoke call per bucket through the CLI (checked, under a timeout), then
#               test_cuda_forward (SWEEP configurations per implementation, default 1000;
#               SWEEP_FILTER picks the tests, e.g. '*Sweep/cuda_sm90:*AutoPicks*'), then the
#               cuda_sm90 sweep again with each tile of SWEEP_TILES forced (FLASHLAB_SM90_FWD_TILE;
#               default "128x176 128x192 128x128": the long tiles of hdim 128 and 96 and hdim 64's
#               short one on every shape; SWEEP_FORCED configurations each, default 400)
#     sanitize  compute-sanitizer memcheck, racecheck, synccheck on a small sm90 sweep and the varlen
#               neighbour test (VarlenNeighbourNonFinite), then the same with each tile of SWEEP_TILES forced
#     bench     flashlab bench, cuda_sm90 beside cuda_sm80 (BENCH_SHAPES); OLD_LIB=DIR also times
#               cuda_sm90 from DIR/libflashlab.so after each shape (an A/B in one call)
#     python    the Python extension built here (FLASHLAB_LIB_DIR=build-carry/lib), the torch tests (incl. KV cache, sinks;
#               FLASHLAB_TEST_PARTIAL_BUILD=1: a test failing only on a head dim / dtype the build lacks is a skip)
#     grid      python -m flashlab.bench over the issue's grid (GRID_PASSES, default fwd; GRID_IMPLS; GRID_ARGS, e.g. "--hdims 128 --seqlens 16384"; FA4 where
#               ../shared/tools/prepare_fa4_peer.sh's install.sh was sourced first) -> $OUT/grid
#     host-profile  python/scripts/profile_host.py: the host and device time of a flashlab.torch backward
#               beside SDPA's (b32 s512 causal and a tiny shape), cProfile of the tiny one -> $OUT/host_profile.txt
#     decode-bench  python -m flashlab.bench_decode (decode against a K/V cache, TB/s: flashlab and
#               KVCacheDecoder beside SDPA's cudnn / flash / efficient backends and FlexAttention;
#               DECODE_ARGS, e.g. "--page-sizes 0,16 --cache-lens 4096,65536"; DECODE_TIMEOUT, default 300 s) -> $OUT/decode,
#               $OUT/decode.txt
#     ring      python/tests/test_distributed_nccl.py (ring attention over NCCL, one process per GPU)
#               and test_distributed.py (gloo) -> $OUT/ring.txt, then benchmarks/ring_scaling.py
#               (RING_ARGS; RING_TESTS_ONLY=1 skips it) -> $OUT/ring_scaling.{txt,md,json}
#     kvcache   tests/gpu/test_cuda_kvcache: the CUDA KV-cache sweep, bandwidth, memcheck
#     bwd       the Hopper backward: a checked CLI smoke per bucket it serves (96, 128, 256), then
#               tests/gpu/test_cuda_backward for cuda_sm90 (BWD_SWEEP configurations run on cuda_sm90,
#               default 1000; the ones it leaves to cuda_sm80 are drawn on top), Workspace, Determinism
#     bwd-sanitize  memcheck, racecheck, synccheck on a small cuda_sm90 backward sweep (SAN_SWEEP
#               draws, default 24; SAN_TOOLS picks the tools; SAN_BUCKET=D keeps the draws of head-dim bucket D)
#     bwd-bench flashlab bench --backward, cuda_sm90 beside cuda_sm80 (BENCH_SHAPES); OLD_LIB=DIR
#               also times cuda_sm90 from DIR/libflashlab.so after each shape (an A/B in one call)
#     fwd-profile  the same for the Hopper forward (PROFILE_SHAPE, default b32 h16 s512 d128), then SDPA
#               cuDNN's forward kernel at that shape, full and causal (benchmarks/sdpa_flash_once.py) ->
#               $OUT/ncu_fwd_*, $OUT/ncu_fwd_vs_cudnn_{full,causal}.md, $OUT/sass_fwd_hot.txt (docs/perf.md)
#     bwd-profile  ncu on the Hopper backward's kernels at one shape (PROFILE_SHAPE; causal and not):
#               the metrics of tools/gpu_check.sh's profile phase -> $OUT/ncu_bwd_*.txt, and the
#               table of tools/ncu_table.py -> $OUT/ncu_bwd_table.md; per-SASS-line hot spots of the
#               main kernel (tools/sass_hotspots.py) -> $OUT/sass_bwd_hot.txt
#     peer-bwd-profile  the same metrics on a peer's backward kernels (PEER: fa4, default, after
#               ../shared/tools/prepare_fa4_peer.sh's install.sh was sourced; or cudnn, flash) at
#               PROFILE_SHAPE through benchmarks/sdpa_flash_once.py -> $OUT/ncu_peer_*.txt and
#               $OUT/ncu_peer_table.md (needs no build-carry)
#     kv-profile  ncu on the KV-cache kernels: the decode tile kernel (CLI, B 32 GQA 32/8 hdim 128, L 4k and
#               64k, auto splits; KV_PROFILE_PAGES, e.g. "0 16 1": page sizes, 0 = contiguous, the default) and the rotary append (test_cuda_kvcache AppendBandwidth) with the metrics of
#               tools/gpu_check.sh's profile phase -> $OUT/ncu_kv_*.txt, $OUT/ncu_kv_table.md; SASS hot spots of
#               the rotary append (tools/sass_hotspots.py) -> $OUT/sass_append_hot.txt
#     ablation  hdim 128 bf16 rebuilt with -DFLASHLAB_SM90_ABLATION; python -m flashlab.bench at
#               16k, causal and not, for each FLASHLAB_SM90_STAGES (serial, pingpong, overlap, all)
set -uo pipefail
cd "$(dirname "$0")/.."
PHASES=${1:-rebuild,sweep,sanitize,bench}
OUT=${OUT:-out-gpu}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)   # absolute: the Python phases run from /tmp
BIN=$PWD/build-carry/bin
export LD_LIBRARY_PATH="$PWD/build-carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
has() { [[ ",$PHASES," == *",$1,"* ]]; }
# The carried library (xz) unless a rebuild in this call made a newer one: a second invocation of
# this script after `rebuild` in the same device call must not put the carried library back.
if [ -f build-carry/lib/libflashlab.so.xz ] && ! has rebuild &&
  { [ ! -f build-carry/lib/libflashlab.so ] || [ build-carry/lib/libflashlab.so.xz -nt build-carry/lib/libflashlab.so ]; }; then
  xz -dc build-carry/lib/libflashlab.so.xz > build-carry/lib/libflashlab.so
fi
if has rebuild; then
  bash tools/device_rebuild.sh 2>&1 | tail -25 | tee "$OUT/rebuild.txt"
  grep -E "C75|spill" /tmp/flashlab-rebuild.log | head -20 | tee -a "$OUT/rebuild.txt"
  xz -T0 -c build-carry/lib/libflashlab.so > "$OUT/libflashlab.so.xz"
fi
rm -f "$BIN/libflashlab.so"
# Smoke: one small call per head-dim bucket through the CLI (checked against the reference), each
# under a timeout (an mbarrier phase bug hangs instead of failing).
#   smoke NAME TIMEOUT "DIMS" [extra flags]   -> $OUT/NAME_<d>.txt, a line per bucket in $OUT/NAME.txt
smoke() {
  local name=$1 limit=$2 dims=$3
  shift 3
  for d in $dims; do
    timeout "$limit" "$BIN/flashlab" bench --impl cuda_sm90 --batch 1 --heads 2 --seqlen 300 --head-dim $d \
      --causal --no-sgemm --iters 1 --quiet "$@" > "$OUT/${name}_$d.txt" 2>&1
    echo "$name hdim $d rc $?" | tee -a "$OUT/$name.txt"
  done
}
if has sweep; then
  smoke smoke 30 "64 128 256"
  FLASHLAB_SM80_SWEEP=${SWEEP:-1000} timeout ${SWEEP_TIMEOUT:-420} "$BIN/test_cuda_forward" \
    --gtest_filter="${SWEEP_FILTER:-*}" > "$OUT/sweep.txt" 2>&1
  echo "sweep rc $?" >> "$OUT/sweep.txt"
  grep -E "sweep|FAILED|PASSED|rc " "$OUT/sweep.txt" | tail -20
  for tile in ${SWEEP_TILES-128x176 128x192 128x128}; do
    FLASHLAB_SM90_FWD_TILE=$tile FLASHLAB_SM80_SWEEP=${SWEEP_FORCED:-400} timeout ${SWEEP_TIMEOUT:-420} \
      "$BIN/test_cuda_forward" --gtest_filter='*Sweep/cuda_sm90' > "$OUT/sweep_$tile.txt" 2>&1
    echo "sweep tile $tile rc $?" >> "$OUT/sweep_$tile.txt"
    grep -E "sweep|FAILED|PASSED|rc " "$OUT/sweep_$tile.txt" | tail -8
  done
fi
if has sanitize; then
  for tile in "" ${SWEEP_TILES-128x176 128x192 128x128}; do
    for tool in memcheck racecheck synccheck; do
      FLASHLAB_SM90_FWD_TILE=$tile FLASHLAB_SM80_SWEEP=${SAN_SWEEP:-12} FLASHLAB_SM80_MAX_SEQLEN=300 timeout 200 \
        compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/test_cuda_forward" \
        --gtest_filter='*Sweep/cuda_sm90:*VarlenNeighbourNonFinite/cuda_sm90' 2>&1 | tail -6 | tee "$OUT/san_$tool$tile.txt"
      echo "$tool${tile:+ tile $tile} rc ${PIPESTATUS[0]}" | tee -a "$OUT/san_$tool$tile.txt"
    done
  done
fi
if has bench; then
  while IFS= read -r shape; do
    [ -n "$shape" ] || continue
    echo "## $shape" | tee -a "$OUT/bench.txt"
    timeout 120 "$BIN/flashlab" bench $shape --impl cuda_sm90,cuda_sm80 --no-sgemm --no-check --iters 20 --quiet 2>&1 |
      tee -a "$OUT/bench.txt"
    if [ -n "${OLD_LIB:-}" ]; then  # same shape, cuda_sm90 of the library in OLD_LIB (an A/B in one call)
      echo "# old library ($OLD_LIB):" | tee -a "$OUT/bench.txt"
      LD_LIBRARY_PATH=$OLD_LIB:$LD_LIBRARY_PATH timeout 120 "$BIN/flashlab" bench $shape --impl cuda_sm90 \
        --no-sgemm --no-check --iters 20 --quiet 2>&1 | tee -a "$OUT/bench.txt"
    fi
  done <<< "${BENCH_SHAPES:-"--batch 1 --heads 16 --seqlen 16384 --head-dim 128
--batch 1 --heads 16 --seqlen 16384 --head-dim 128 --causal
--batch 1 --heads 8 --seqlen 16384 --head-dim 256
--batch 1 --heads 32 --seqlen 16384 --head-dim 64
--batch 32 --heads 16 --seqlen 512 --head-dim 128 --causal"}"
fi

# The metrics of tools/gpu_check.sh's profile phase, one comma-separated list for ncu --metrics.
ncu_metrics() {
  sed -n '/^  metrics="gpu__time/,/stalled_/p' tools/gpu_check.sh | sed -E 's/^ *metrics\+?="?//; s/"$//' | tr -d '\n' |
    sed 's/\\\\/\\/g'
}

py_setup() {
  [ -n "${PY_READY:-}" ] && return 0
  WHEEL_LIBS=$(python3 -c 'import glob, os, nvidia
hits = [h for p in nvidia.__path__ for h in glob.glob(os.path.join(p, "**", "libcublas.so.*"), recursive=True)]
print(":".join(sorted({os.path.dirname(h) for h in hits})))' 2>/dev/null)
  export LD_LIBRARY_PATH="$PWD/build-carry/lib:/usr/local/cuda/lib64:${WHEEL_LIBS}:${LD_LIBRARY_PATH:-}"
  # A warm machine keeps older builds: the package in /tmp/flashlab-site (pip --target would not
  # replace it) and python/build, whose CMake cache would keep an earlier FLASHLAB_LIB_DIR.
  rm -rf /tmp/flashlab-site python/build
  FLASHLAB_LIB_DIR=$PWD/build-carry/lib python3 -m pip install -q --no-build-isolation --no-deps --no-index \
    --target /tmp/flashlab-site ./python > "$OUT/pybuild.txt" 2>&1 || { tail -20 "$OUT/pybuild.txt"; return 1; }
  export PYTHONPATH=/tmp/flashlab-site${PYTHONPATH:+:$PYTHONPATH}
  PY_READY=1
}
if has python; then
  py_setup && (cd /tmp && FLASHLAB_TEST_PARTIAL_BUILD=1 timeout 300 python3 -m pytest -q -rfs "$OLDPWD/python/tests/test_torch.py" \
    "$OLDPWD/python/tests/test_flash_attn.py" "$OLDPWD/python/tests/test_torch_kvcache.py" \
    "$OLDPWD/python/tests/test_torch_kvcache_cuda.py" "$OLDPWD/python/tests/test_torch_sinks.py" "$OLDPWD/python/tests/test_kvcache.py" -s > "$OUT/torch_tests.txt" 2>&1; echo "torch tests rc $?" >> "$OUT/torch_tests.txt")
  grep -E "^FAILED|passed|failed|rc |\[graph\]" "$OUT/torch_tests.txt" | tail -14
fi
if has ring; then
  # Ring attention over NCCL on every GPU of the machine (python/tests/test_distributed_nccl.py) and
  # the gloo tests, then benchmarks/ring_scaling.py (RING_ARGS, e.g. "--gpus 1,2 --strong ''"; its
  # defaults: weak 32k per GPU, strong 256k h8 and 1M h4, causal and not) -> $OUT/ring.txt,
  # $OUT/ring_scaling.{md,json}. NVLink multicast stays off (NCCL_NVLS_ENABLE=0, KINDS.md).
  export NCCL_NVLS_ENABLE=0
  py_setup && (cd /tmp && timeout ${RING_TIMEOUT:-240} python3 -m pytest -q -rfs -s \
    "$OLDPWD/python/tests/test_distributed_nccl.py" "$OLDPWD/python/tests/test_distributed.py" > "$OUT/ring.txt" 2>&1
    echo "ring rc $?" >> "$OUT/ring.txt")
  grep -E "passed|failed|rc |FAILED|Error" "$OUT/ring.txt" | tail -20
  if [ -z "${RING_TESTS_ONLY:-}" ]; then
    (cd /tmp && PYTHONUNBUFFERED=1 timeout ${RING_BENCH_TIMEOUT:-420} python3 "$OLDPWD/benchmarks/ring_scaling.py" \
      --out "$OUT" ${RING_ARGS:-} 2>&1 | tee "$OUT/ring_scaling.txt"; echo "ring_scaling rc ${PIPESTATUS[0]}")
  fi
fi
if has grid; then
  py_setup && (cd /tmp && timeout ${GRID_TIMEOUT:-400} python3 -m flashlab.bench --passes ${GRID_PASSES:-fwd} \
    --impls "${GRID_IMPLS:-flashlab:auto,flashlab:cuda_sm80,sdpa_flash,sdpa_cudnn,fa4}" ${GRID_ARGS:-} --out "$OUT/grid" \
    > "$OUT/grid.txt" 2>&1; echo "grid rc $?" >> "$OUT/grid.txt")
  tail -45 "$OUT/grid.txt"
fi
if has host-profile; then
  py_setup && (cd /tmp && timeout 200 python3 "$OLDPWD/python/scripts/profile_host.py" > "$OUT/host_profile.txt" 2>&1
    echo "host-profile rc $?" >> "$OUT/host_profile.txt")
  head -60 "$OUT/host_profile.txt"
fi
if has decode-bench; then
  py_setup && (cd /tmp && timeout ${DECODE_TIMEOUT:-300} python3 -m flashlab.bench_decode --out "$OUT/decode" \
    ${DECODE_ARGS:-} > "$OUT/decode.txt" 2>&1; echo "decode-bench rc $?" >> "$OUT/decode.txt")
  sed '/<details>/,$d' "$OUT/decode.txt" | tail -30; tail -1 "$OUT/decode.txt"   # the tables, then the rc
fi
if has ablation; then
  # Python-side timing (the CLI needs OpenBLAS, which does not fit beside FA4 in one transfer).
  HEAD_DIMS=128 DTYPES=bf16 BUILD_DIR=/tmp/flashlab-ablation DEST=/tmp/ablation-lib \
    CUDAFLAGS=-DFLASHLAB_SM90_ABLATION bash tools/device_rebuild.sh 2>&1 | tail -3 | tee "$OUT/ablation.txt"
  cp /tmp/ablation-lib/libflashlab.so build-carry/lib/libflashlab.so
  py_setup
  for st in serial pingpong overlap all; do
    (cd /tmp && FLASHLAB_SM90_STAGES=$st timeout 120 python3 -m flashlab.bench --passes fwd --hdims 128 \
      --seqlens 16384 --impls flashlab:cuda_sm90 --out "$OUT/ablation_$st" > "$OUT/ablation_$st.txt" 2>&1)
    echo "stage $st:" | tee -a "$OUT/ablation.txt"; grep "cuda_sm90" "$OUT/ablation_$st.txt" | tee -a "$OUT/ablation.txt"
  done
fi
if has bwd; then
  smoke bwd_smoke 60 "96 128 256" --backward
  FLASHLAB_SM80_BWD_SWEEP=${BWD_SWEEP:-1000} FLASHLAB_SM80_BWD_SWEEP_RUN=1 timeout ${SWEEP_TIMEOUT:-420} \
    "$BIN/test_cuda_backward" \
    --gtest_filter="${BWD_FILTER:-*/cuda_sm90}" > "$OUT/bwd_sweep.txt" 2>&1
  echo "bwd sweep rc $?" >> "$OUT/bwd_sweep.txt"
  grep -E "sweep|FAILED|PASSED|rc |Failure" "$OUT/bwd_sweep.txt" | head -30
fi
if has bwd-sanitize; then
  for tool in ${SAN_TOOLS:-memcheck racecheck synccheck}; do
    FLASHLAB_SM80_BWD_SWEEP=${SAN_SWEEP:-24} FLASHLAB_SM80_BWD_BUCKET=${SAN_BUCKET:-0} FLASHLAB_SM80_MAX_SEQLEN=300 timeout 200 \
      compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/test_cuda_backward" \
      --gtest_filter='*Sweep/cuda_sm90:*VarlenNeighbourNonFinite/cuda_sm90' > "$OUT/bwd_san_$tool.txt" 2>&1
    echo "$tool rc $?" | tee -a "$OUT/bwd_san_$tool.txt"
    grep -E "SUMMARY|sweep" "$OUT/bwd_san_$tool.txt"
  done
fi
if has bwd-bench; then
  while IFS= read -r shape; do
    [ -n "$shape" ] || continue
    echo "## $shape" | tee -a "$OUT/bwd_bench.txt"
    timeout 120 "$BIN/flashlab" bench $shape --backward --impl cuda_sm90,cuda_sm80 --no-sgemm --no-check --iters 10 \
      --quiet 2>&1 | grep -E "bwd|impl" | tee -a "$OUT/bwd_bench.txt"
    if [ -n "${OLD_LIB:-}" ]; then  # same shape, cuda_sm90 of the library in OLD_LIB (an A/B in one call)
      echo "# old library ($OLD_LIB):" | tee -a "$OUT/bwd_bench.txt"
      LD_LIBRARY_PATH=$OLD_LIB:$LD_LIBRARY_PATH timeout 120 "$BIN/flashlab" bench $shape --backward --impl cuda_sm90 \
        --no-sgemm --no-check --iters 10 --quiet 2>&1 | grep -E "bwd|impl" | tee -a "$OUT/bwd_bench.txt"
    fi
  done <<< "${BENCH_SHAPES:-"--batch 1 --heads 16 --seqlen 16384 --head-dim 128
--batch 1 --heads 16 --seqlen 16384 --head-dim 128 --causal
--batch 1 --heads 32 --seqlen 16384 --head-dim 64
--batch 32 --heads 16 --seqlen 512 --head-dim 128 --causal"}"
fi
# ncu on one cuda_sm90 pass at one shape: the metrics of tools/gpu_check.sh's profile phase, causal
# and not, as a table (tools/ncu_table.py), then per-SASS-line hot spots of the main kernel
# (non-causal; tools/sass_hotspots.py).
#   kernel_profile TAG KERNELS MAIN_KERNEL LAUNCHES SHAPE [CLI flags]  -> $OUT/ncu_TAG_*.txt, $OUT/sass_TAG_hot.txt
# kernel_profile's metrics: gpu_check.sh's, plus the tensor pipe, L2, occupancy and DRAM.
kernel_metrics() {
  local metrics
  metrics=$(ncu_metrics)
  metrics+=",sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,lts__throughput.avg.pct_of_peak_sustained_elapsed"
  metrics+=",sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed"
  echo "$metrics"
}
kernel_profile() {
  local tag=$1 kernels=$2 main_kernel=$3 launches=$4 shape=$5
  shift 5
  local metrics files=() causal mode
  metrics=$(kernel_metrics)
  for causal in "" "--causal"; do
    mode=full; [ -n "$causal" ] && mode=causal
    timeout 200 ncu --metrics "$metrics" --kernel-name-base demangled -k "regex:$kernels" -c "$launches" "$BIN/flashlab" \
      bench --impl cuda_sm90 $shape $causal "$@" --warmup 0 --iters 1 --no-check --no-sgemm --quiet \
      > "$OUT/ncu_${tag}_$mode.txt" 2>&1
    echo "ncu $tag $mode rc $?"
    files+=("$OUT/ncu_${tag}_$mode.txt")
  done
  python3 tools/ncu_table.py "${files[@]}" | tee "$OUT/ncu_${tag}_table.md"
  timeout 200 ncu --section SourceCounters --section WarpStateStats --kernel-name-base demangled \
    -k "regex:$main_kernel" -c 1 -f -o "$OUT/sass_$tag" "$BIN/flashlab" bench --impl cuda_sm90 $shape "$@" \
    --warmup 0 --iters 1 --no-check --no-sgemm --quiet > "$OUT/sass_$tag.log" 2>&1
  ncu --import "$OUT/sass_$tag.ncu-rep" --page source --csv --print-source sass > "/tmp/sass_$tag.csv" 2>> "$OUT/sass_$tag.log"
  python3 tools/sass_hotspots.py "/tmp/sass_$tag.csv" --top 60 > "$OUT/sass_${tag}_hot.txt" 2>&1
  rm -f "$OUT/sass_$tag.ncu-rep"
  head -50 "$OUT/sass_${tag}_hot.txt"
}
if has bwd-profile; then
  kernel_profile bwd 'FlashBwdKernel|BwdConvertDq' FlashBwdKernel 2 \
    "${PROFILE_SHAPE:---batch 1 --heads 16 --seqlen 8192 --head-dim 128}" --backward
fi
if has peer-bwd-profile; then
  metrics=$(kernel_metrics)
  files=()
  for causal in "" "--causal"; do
    mode=full; [ -n "$causal" ] && mode=causal
    # The peers' backward kernels by name (FA4: CuTe-DSL names with "bwd"; cuDNN: "dgrad"/"bprop";
    # FA2: flash_bwd_*); -c caps the launches profiled.
    timeout 300 ncu --metrics "$metrics" --kernel-name-base demangled -k 'regex:[Bb]wd|[Bb]ackward|bprop|dgrad' \
      -c "${PEER_LAUNCHES:-4}" python3 benchmarks/sdpa_flash_once.py --backend "${PEER:-fa4}" \
      ${PROFILE_SHAPE:---batch 1 --heads 16 --seqlen 8192 --head-dim 128} $causal > "$OUT/ncu_peer_$mode.txt" 2>&1
    echo "ncu peer ${PEER:-fa4} $mode rc $?"
    files+=("$OUT/ncu_peer_$mode.txt")
  done
  python3 tools/ncu_table.py "${files[@]}" | tee "$OUT/ncu_peer_table.md"
fi
if has fwd-profile; then
  # The forward's kernel (its launch mode as auto picks it; FLASHLAB_SM90_FWD_CTAS overrides), then
  # SDPA cuDNN's forward kernel at the same shape (benchmarks/sdpa_flash_once.py) for comparison.
  kernel_profile fwd 'device_kernel' 'device_kernel' 1 \
    "${PROFILE_SHAPE:---batch 32 --heads 16 --seqlen 512 --head-dim 128}"
  py_setup || exit 1
  for causal in "" "--causal"; do  # cuDNN's kernel beside ours, same shape, same mask
    mode=full; [ -n "$causal" ] && mode=causal
    timeout 200 ncu --metrics "$(ncu_metrics),dram__throughput.avg.pct_of_peak_sustained_elapsed" \
      -k 'regex:fprop' -c 1 python3 benchmarks/sdpa_flash_once.py --backend cudnn \
      ${PROFILE_SHAPE:---batch 32 --heads 16 --seqlen 512 --head-dim 128} $causal > "$OUT/ncu_fwd_cudnn_$mode.txt" 2>&1
    echo "ncu cudnn $mode rc $?"
    python3 tools/ncu_table.py "$OUT/ncu_fwd_$mode.txt" "$OUT/ncu_fwd_cudnn_$mode.txt" | tee "$OUT/ncu_fwd_vs_cudnn_$mode.md"
  done
fi
if has kv-profile; then
  metrics=$(ncu_metrics)
  metrics+=",lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active"
  files=()
  for P in ${KV_PROFILE_PAGES:-0}; do
    for L in 4096 65536; do
      tag=$L; [ "$P" = 0 ] || tag=${L}_page$P
      timeout 200 ncu --metrics "$metrics" --kernel-name-base demangled -k 'regex:decode_tile_kernel' -c 1 "$BIN/flashlab" bench \
        --decode --impl cuda_sm80 --batch 32 --heads 32 --heads-kv 8 --head-dim 128 --cache-len $L --page-size $P \
        --warmup 0 --iters 1 --no-check --quiet > "$OUT/ncu_kv_decode_$tag.txt" 2>&1
      echo "ncu decode L $L page $P rc $?"
      files+=("$OUT/ncu_kv_decode_$tag.txt")
    done
  done
  # AppendBandwidth's case 1: 1024 new tokens per sequence, contiguous, NeoX rotary over the whole head.
  FLASHLAB_KV_BENCH=1 FLASHLAB_KV_APPEND_ONLY=1 timeout 200 ncu --metrics "$metrics" --kernel-name-base demangled \
    -k 'regex:append_kernel' -s 2 -c 1 \
    "$BIN/test_cuda_kvcache" --gtest_filter='*AppendBandwidth*' > "$OUT/ncu_kv_append_rotary.txt" 2>&1
  echo "ncu append rc $?"
  files+=("$OUT/ncu_kv_append_rotary.txt")
  python3 tools/ncu_table.py "${files[@]}" | tee "$OUT/ncu_kv_table.md"
  FLASHLAB_KV_BENCH=1 FLASHLAB_KV_APPEND_ONLY=1 timeout 200 ncu --section SourceCounters --section WarpStateStats \
    --kernel-name-base demangled -k 'regex:append_kernel' -s 2 -c 1 -f -o "$OUT/sass_append" "$BIN/test_cuda_kvcache" \
    --gtest_filter='*AppendBandwidth*' \
    > "$OUT/sass_append.log" 2>&1
  ncu --import "$OUT/sass_append.ncu-rep" --page source --csv --print-source sass > /tmp/sass_append.csv 2>> "$OUT/sass_append.log"
  python3 tools/sass_hotspots.py /tmp/sass_append.csv --top 40 > "$OUT/sass_append_hot.txt" 2>&1
  rm -f "$OUT/sass_append.ncu-rep"
  head -30 "$OUT/sass_append_hot.txt"
fi
if has kvcache; then
  FLASHLAB_KV_SWEEP=${KV_SWEEP:-300} FLASHLAB_KV_BENCH=1 timeout 300 "$BIN/test_cuda_kvcache" > "$OUT/kvcache.txt" 2>&1
  echo "kvcache rc $?" >> "$OUT/kvcache.txt"
  grep -E "kv |FAILED|PASSED|Failure|case |rc " "$OUT/kvcache.txt" | head -50
  FLASHLAB_KV_SWEEP=8 FLASHLAB_KV_APPEND_SWEEP=20 FLASHLAB_KV_COMBINE_SWEEP=10 timeout 120 \
    compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_cuda_kvcache" \
    --gtest_filter='*Sweep*:*Sinks*:*AutoDispatch*:*BadInputs*' > "$OUT/kv_memcheck.txt" 2>&1
  echo "kv memcheck rc $?"; tail -2 "$OUT/kv_memcheck.txt"
fi
