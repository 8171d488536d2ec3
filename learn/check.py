#!/usr/bin/env python3
"""learn/check.py — grade the exercises in learn/exercises/ (docs/learn/exercises.md).

    python learn/check.py                      grade your stubs: pass / fail: <why> / todo
    python learn/check.py algorithm            one topic (a folder under learn/exercises/)
    python learn/check.py online_softmax       one exercise (or algorithm/online_softmax)
    python learn/check.py --solutions          grade the reference solutions (exit 0 iff all pass)
    python learn/check.py --mutants            grade the broken variants (exit 0 iff all rejected)
    python learn/check.py --list               list the exercises and what each one trains
    python learn/check.py --seed 1234          replay the random inputs of an earlier run

Layout: learn/exercises/<topic>/<exercise>/ holds
    stub.py       the file you edit (its functions raise NotImplementedError until you do)
    solution.py   a reference solution, kept apart: read it after you pass, not before
    mutants/*.py  realistic broken versions of the solution; the checks must reject every one
    check.py      the spec: CONCEPT (one line), NEEDS_GPU (bool), check(module, rng) which raises
                  grading.Fail(check_name, message) on the first wrong result; optionally
                  check_cpu(module, rng), the CPU path of a GPU exercise; optionally require(),
                  run before the target file is loaded, which raises grading.Skip when a module
                  that file imports is missing (the triton topic without torch/triton)
<topic>/ORDER (optional) lists the exercises in the suggested order.
learn/exercises/grading.py (Fail, close, equal, randn) and reference.py (the float64 oracle) are
shared by all checks. A new topic is a new folder; a new exercise is a new folder in it.

Inputs are drawn fresh every run (the seed is printed first); they are never zero. A stub that still
raises NotImplementedError is reported as todo, never as pass. Default mode exits 0 when nothing
failed (todo is not a failure); exercises that need a GPU are skipped without one unless they have
a CPU path. A check may raise grading.Skip(why) for a missing dependency (the cute topic without
.deps/cutlass, the triton topic without torch and triton: run tools/setup.sh); a skip fails no
mode. The triton topic runs its kernels in Triton's interpreter (TRITON_INTERPRET=1) without a GPU.
"""

import argparse
import importlib.util
import os
import sys
import time
import traceback
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent / "exercises"


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def discover():
    """[(topic, name, folder)]: topics by name, exercises in the topic's ORDER file, then by name."""
    found = []
    for topic in sorted(p for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))):
        order_file = topic / "ORDER"  # optional: the suggested order, one exercise name a line
        order = order_file.read_text().split() if order_file.is_file() else []
        rank = {name: i for i, name in enumerate(order)}
        exs = sorted((p for p in topic.iterdir() if (p / "check.py").is_file()),
                     key=lambda p: (rank.get(p.name, len(order)), p.name))
        found.extend((topic.name, ex.name, ex) for ex in exs)
    return found


def have_gpu():
    if os.environ.get("FLASHLAB_LEARN_GPU") == "0":
        return False
    try:
        import torch  # noqa: PLC0415  (optional: the algorithm track needs only NumPy)

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def grade(spec, target_path, label, seed, gpu):
    """Returns (status, detail): status in pass, fail, todo, skip."""
    import numpy as np

    fn = spec.check
    if hasattr(spec, "require"):  # a dependency that the target file itself imports (triton, torch)
        try:
            spec.require()
        except spec.grading.Skip as s:
            return "skip", str(s)
    if getattr(spec, "NEEDS_GPU", False) and not gpu:
        if not hasattr(spec, "check_cpu"):
            return "skip", "needs a GPU"
        fn = spec.check_cpu
    try:
        mod = load(target_path, "learnex_" + label.replace("/", "_").replace(".", "_"))
    except NotImplementedError:
        return "todo", ""
    except Exception as e:
        return "fail", ("import", f"{target_path.name} does not load: {type(e).__name__}: {e}")
    rng = np.random.default_rng([seed, zlib.crc32(label.encode())])
    try:
        with np.errstate(all="ignore"):  # overflow/NaN is judged by the checks, not warned about
            fn(mod, rng)
    except NotImplementedError:
        return "todo", f"{target_path.name} still raises NotImplementedError"
    except spec.grading.Skip as s:
        return "skip", str(s)
    except spec.grading.Fail as f:
        return "fail", (f.check, f.message)
    except Exception as e:
        tb = traceback.extract_tb(e.__traceback__)
        where = ", ".join(f"{Path(fr.filename).name}:{fr.lineno}" for fr in tb
                          if Path(fr.filename).parent in (target_path.parent, target_path.parent.parent))
        return "fail", ("crash", f"{type(e).__name__}: {e}" + (f" ({where})" if where else ""))
    return "pass", ""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", nargs="?", help="topic, exercise, or topic/exercise")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--solutions", action="store_true", help="grade the reference solutions")
    mode.add_argument("--mutants", action="store_true", help="grade every mutant (all must fail)")
    mode.add_argument("--list", action="store_true", help="list exercises")
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: fresh)")
    ap.add_argument("-v", "--verbose", action="store_true", help="mutants: also print why")
    args = ap.parse_args(argv)

    sys.path.insert(0, str(ROOT))  # checks import grading and reference
    import grading  # noqa: PLC0415

    exercises = discover()
    if args.target:
        t = args.target.strip("/")
        exercises = [e for e in exercises if t in (e[0], e[1], f"{e[0]}/{e[1]}")]
        if not exercises:
            print(f"no topic or exercise named {t!r}; try --list")
            return 2
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    gpu = False
    if any("NEEDS_GPU = True" in (f / "check.py").read_text() for _, _, f in exercises):
        gpu = have_gpu()  # imports torch: only when some selected exercise asks for a GPU
    width = max(len(f"{t}/{n}") for t, n, _ in exercises)

    if args.list:
        for topic, name, folder in exercises:
            spec = load(folder / "check.py", f"spec_{topic}_{name}")
            muts = sorted(p.stem for p in (folder / "mutants").glob("*.py"))
            gpu_tag = " [GPU]" if getattr(spec, "NEEDS_GPU", False) else ""
            print(f"{topic}/{name:<{width - len(topic) - 1}}  {spec.CONCEPT}{gpu_tag}")
            print(f"{'':<{width}}  mutants: {', '.join(muts) or '-'}")
        return 0

    what = "solutions" if args.solutions else "mutants" if args.mutants else "stubs"
    print(f"learn/check.py: {what}, {len(exercises)} exercise(s), seed {seed}, "
          f"GPU {'yes' if gpu else 'no (or not needed)'}")
    t0 = time.time()
    counts = {}
    bad = 0
    for topic, name, folder in exercises:
        label = f"{topic}/{name}"
        spec = load(folder / "check.py", f"spec_{topic}_{name}")
        spec.grading = grading
        if args.mutants:
            muts = sorted((folder / "mutants").glob("*.py"))
            if not muts:
                print(f"{label:<{width}}  no mutants")
            for m in muts:
                status, detail = grade(spec, m, f"{label}/{m.stem}", seed, gpu)
                mlabel = f"{label} ~ {m.stem}"
                if status == "fail":
                    line = f"caught by [{detail[0]}]"
                    if args.verbose:
                        line += f": {detail[1]}"
                    counts["caught"] = counts.get("caught", 0) + 1
                elif status == "skip":
                    line = f"skip ({detail})"
                    counts["skip"] = counts.get("skip", 0) + 1
                else:
                    line = f"NOT CAUGHT ({status})"
                    counts["not caught"] = counts.get("not caught", 0) + 1
                    bad += 1
                print(f"  {mlabel:<{width + 28}}  {line}")
            continue
        target = folder / ("solution.py" if args.solutions else "stub.py")
        status, detail = grade(spec, target, label, seed, gpu)
        counts[status] = counts.get(status, 0) + 1
        if status == "fail" or (args.solutions and status == "todo"):
            bad += 1
        if status == "fail":
            shown = f"fail: [{detail[0]}] {detail[1]}"
        else:
            shown = f"skip ({detail})" if status == "skip" else status
            if status == "todo":
                shown = f"todo      {target.relative_to(ROOT.parent.parent)}"
        print(f"{label:<{width}}  {shown}")

    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    print(f"-- {summary} ({time.time() - t0:.1f} s, seed {seed})")
    return 1 if bad else 0


if __name__ == "__main__":
    if hasattr(__import__("signal"), "SIGPIPE"):  # `check.py | head` ends quietly
        import signal

        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
