"""The learning exercises' checker (learn/check.py, docs/learn/exercises.md), CPU only, NumPy only.

--solutions must pass every exercise and --mutants must reject every mutant, on fresh random inputs
each run; an untouched stub must be reported as todo, never as pass.
"""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "learn" / "check.py"


def run(*args):
    return subprocess.run([sys.executable, str(CHECK), *args], capture_output=True, text=True, timeout=300)


def test_solutions_pass():
    r = run("--solutions")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fail:" not in r.stdout


def test_every_mutant_is_caught():
    r = run("--mutants")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "NOT CAUGHT" not in r.stdout
    assert r.stdout.count("caught by [") >= 17


def test_list_and_filters():
    r = run("--list")
    assert r.returncode == 0 and "algorithm/online_softmax" in r.stdout
    r = run("algorithm/lse_row", "--solutions")
    assert r.returncode == 0 and "1 exercise(s)" in r.stdout
    assert run("no_such_exercise").returncode == 2


def _checker():
    spec = importlib.util.spec_from_file_location("learn_check", CHECK)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.path.insert(0, str(mod.ROOT))
    import grading

    return mod, grading


def test_untouched_stubs_are_todo(tmp_path):
    check, grading = _checker()
    n = 0
    for topic, name, folder in check.discover():
        text = (folder / "stub.py").read_text()
        if "raise NotImplementedError" not in text and '": None,' not in text:
            continue  # a learner's solved stub (code exercises raise, question exercises hold None)
        stub = tmp_path / f"{topic}_{name}.py"
        stub.write_text(text)
        spec = check.load(folder / "check.py", f"spec_{topic}_{name}")
        spec.grading = grading
        status, _ = check.grade(spec, stub, f"{topic}/{name}", 1, False)
        assert status in ("todo", "skip"), f"{topic}/{name}: untouched stub graded {status}"
        n += 1
    assert n > 0


@pytest.mark.parametrize("body, status", [
    ("def lse_row(s):\n    return float('nan')\n", "fail"),
    ("def lse_row(s):\n    return 0.0\n", "fail"),
    ("def lse_row(s):\n    raise NotImplementedError\n", "todo"),
    ("import numpy as np\ndef lse_row(s):\n    m = np.max(s)\n"
     "    return -np.inf if m == -np.inf else m + np.log(np.exp(s - m).sum())\n", "pass"),
])
def test_grading_outcomes(tmp_path, body, status):
    check, grading = _checker()
    folder = check.ROOT / "algorithm" / "lse_row"
    mod = tmp_path / "attempt.py"
    mod.write_text(body)
    spec = check.load(folder / "check.py", "spec_lse_row_t")
    spec.grading = grading
    assert check.grade(spec, mod, "algorithm/lse_row", 7, False)[0] == status


def test_gpu_exercise_without_gpu(tmp_path):
    """An exercise that needs a GPU is skipped without one, or graded on its CPU path if it has one."""
    import types

    check, grading = _checker()
    mod = tmp_path / "attempt.py"
    mod.write_text("def f():\n    return 1\n")

    def gpu_only(m, rng):
        raise AssertionError("the GPU check must not run without a GPU")

    def cpu_path(m, rng):
        if m.f() != 2:
            raise grading.Fail("cpu path", "f() must return 2")

    spec = types.SimpleNamespace(NEEDS_GPU=True, check=gpu_only, grading=grading)
    assert check.grade(spec, mod, "t/gpu", 1, False) == ("skip", "needs a GPU")
    spec.check_cpu = cpu_path
    assert check.grade(spec, mod, "t/gpu", 1, False) == ("fail", ("cpu path", "f() must return 2"))


def test_question_answers_normalized(tmp_path):
    """Question exercises (topic reading): case, whitespace, quotes and "(c)" do not matter;
    numbers are exact; a partly answered stub is todo; a wrong answer fails without revealing it."""
    check, grading = _checker()
    import quiz

    assert quiz.normalize("  Flash_FWD_params ") == quiz.normalize("flash_fwd_params")
    assert quiz.normalize("(B)") == "b" and quiz.normalize("`gemm_rs()`") == "gemm_rs"
    assert quiz.normalize(" 64 ") == quiz.normalize(64) == "64"
    assert quiz.normalize(64.0) is None and quiz.normalize(True) is None
    folder = check.ROOT / "reading" / "mask"
    spec = check.load(folder / "check.py", "spec_reading_mask_t")
    spec.grading = grading
    sol = check.load(folder / "solution.py", "sol_reading_mask_t").ANSWERS

    def grade(answers):
        mod = tmp_path / "attempt.py"
        mod.write_text(f"ANSWERS = {answers!r}\n")
        return check.grade(spec, mod, "reading/mask", 1, False)

    assert grade(sol)[0] == "pass"
    assert grade({**sol, "q2": str(sol["q2"]).upper() + " "})[0] == "pass"
    assert grade({**sol, "q1": None})[0] == "todo"
    status, (which, message) = grade({**sol, "q3": sol["q3"] + 1})
    assert status == "fail" and which == "q3" and str(sol["q3"]) not in message

def test_cuda_basics_topic():
    """The CUDA-basics track: at least 15 exercises, each with a mutant, none needing a GPU."""
    check, _ = _checker()
    exs = [f for t, _, f in check.discover() if t == "cuda_basics"]
    assert len(exs) >= 15
    for folder in exs:
        assert list((folder / "mutants").glob("*.py")), folder.name
        assert "NEEDS_GPU = False" in (folder / "check.py").read_text(), folder.name


CUTE_TOPICS = ("layout_index", "size_cosize", "coalesce", "composition", "complement", "right_inverse",
               "logical_divide_1d", "logical_divide_2d", "zipped_divide", "logical_product",
               "blocked_raked_product", "swizzle_fn", "smem_swizzle", "ldmatrix_conflicts", "mma_tv_layout",
               "copy_partition", "rowcol_layout", "acc_to_a_layout")


def test_cute_topic():
    """The CuTe track: at least 15 host-checkable exercises graded against pycute, each with a
    mutant, none needing a GPU, none importing pycute in the learner's files."""
    check, _ = _checker()
    exs = {n: f for t, n, f in check.discover() if t == "cute"}
    assert len(exs) >= 15 and set(CUTE_TOPICS) <= set(exs)
    for name, folder in exs.items():
        assert list((folder / "mutants").glob("*.py")), name
        assert "NEEDS_GPU = False" in (folder / "check.py").read_text(), name
        for f in [folder / "stub.py", folder / "solution.py", *(folder / "mutants").glob("*.py")]:
            imports = [ln for ln in f.read_text().splitlines() if ln.lstrip().startswith(("import ", "from "))]
            assert not [ln for ln in imports if "pycute" in ln or "cute" in ln.split()[1]], \
                f"{name}/{f.name} must not use pycute (the learner computes the answers by hand)"


def test_cute_topic_skips_without_cutlass():
    """Without .deps/cutlass (tools/setup.sh not run) the cute exercises are skipped, saying why."""
    import os

    env = {**os.environ, "FLASHLAB_CUTLASS_DIR": "/nonexistent/cutlass"}
    for mode in ("--solutions", "--mutants"):
        r = subprocess.run([sys.executable, str(CHECK), "cute", mode], capture_output=True, text=True,
                           timeout=300, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "skip" in r.stdout and "tools/setup.sh" in r.stdout and "pass" not in r.stdout
