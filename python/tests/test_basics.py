"""The learning basics (learn/basics/, docs/learn/basics-cuda.md and basics-triton.md), CPU side.

* ncu_vs_sim.py --sim-only: the simulator's side of the simulator-vs-ncu comparison, run on the
  exercises' own files (NumPy only): 4 vs 32 sectors per warp request, 32-way vs 1-way.
* summarize.py on a made-up run folder: the criteria and the tables are produced.
* run_gpu.sh with no time budget (every step skipped): $OUT ends with summary.md, steps.tsv and
  logs.tar.xz only (the device tool returns at most 8 files a call).
* every Triton-basics program with --small in Triton's interpreter (skipped without torch and
  triton; a couple of seconds each). The GPU runs are learn/basics/run_gpu.sh's.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASICS = ROOT / "learn" / "basics"
TRITON_PROGRAMS = ["vector_add", "softmax_fused", "online_softmax", "matmul", "block_ptr", "torch_op", "ir_stages"]


def run(args, env=None, timeout=300):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env=env)


def test_simulator_side_of_ncu_comparison(tmp_path):
    r = run([BASICS / "ncu_vs_sim.py", "--sim-only", "--out", tmp_path])
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {}
    for line in (tmp_path / "ncu_vs_sim.md").read_text().splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[(cells[0].split(" (")[0], cells[1])] = float(cells[2])
    assert rows[("coalesced: interleaved", "load sectors / request")] == 4
    assert rows[("strided: chunked, k = 32", "load sectors / request")] == 32
    assert rows[("transpose tile[32][32]", "shared load wavefronts / request")] == 32
    assert rows[("transpose tile[32][33]", "shared load wavefronts / request")] == 1
    assert rows[("transpose swizzled", "shared load wavefronts / request")] == 1


def test_summary_of_a_run(tmp_path):
    (tmp_path / "cuda_06_reduce.log").write_text(
        "result | 06_reduce | v3 reduce_grid_stride (float4, 4 in flight) | 3000 | GB/s | 95.0 %\n")
    (tmp_path / "triton_matmul.log").write_text("result | triton/matmul | triton / torch.matmul | 0.65 | x | -\n")
    (tmp_path / "steps.tsv").write_text("build\t0\t12\tbuild.log\ncuda_01_indexing\t124\t60\tcuda_01_indexing.log\n")
    r = run([BASICS / "summarize.py", tmp_path])
    assert r.returncode == 0, r.stderr
    assert "| reduction >= 70 % of copy (06_reduce v3) | 95 % (met" in r.stdout
    assert "0.65x (NOT met" in r.stdout
    assert "| cuda_01_indexing | 124 (timeout) |" in r.stdout


def test_run_gpu_writes_three_files(tmp_path):
    import shutil
    import tarfile

    if shutil.which("tar") is None:
        pytest.skip("no tar")
    out = tmp_path / "out"
    env = dict(os.environ, OUT=str(out), BIN=str(tmp_path / "bin"), BUDGET_S="0", PYTHON=sys.executable,
               TMPDIR=str(tmp_path))
    r = subprocess.run(["bash", str(BASICS / "run_gpu.sh")], capture_output=True, text=True, timeout=120,
                       cwd=ROOT, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["logs.tar.xz", "steps.tsv", "summary.md"]
    with tarfile.open(out / "logs.tar.xz") as tar:
        names = {Path(n).name for n in tar.getnames()}
    assert {"steps.tsv", "summary.md", "gpu.txt"} <= names
    assert "| build | skipped |" in (out / "summary.md").read_text()
    assert not list(tmp_path.glob("basics-logs.*"))  # the temporary folder is removed


@pytest.mark.parametrize("program", TRITON_PROGRAMS)
def test_triton_basics_small(program):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    env = dict(os.environ)
    import torch

    if not torch.cuda.is_available():
        env["TRITON_INTERPRET"] = "1"
    r = run([BASICS / "triton" / f"{program}.py", "--small"], env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "FAILED" not in r.stdout
