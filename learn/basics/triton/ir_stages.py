#!/usr/bin/env python3
"""learn/basics/triton/ir_stages.py — what Triton makes of a kernel: ttir -> ttgir -> llir -> ptx.

A launch returns the compiled kernel; its .asm dict holds every stage:

  ttir   Triton IR: the program as written, on whole blocks (tt.load of a tensor of pointers,
         arith on tensor<1024xf32>); no threads yet
  ttgir  Triton GPU IR: the same ops with a *layout* on every tensor (#blocked: which thread and
         register holds which element, sizePerThread = the vector width), plus num-warps and the
         target (cuda:90); shared-memory and async-copy ops appear here for pipelined kernels
  llir   LLVM IR: per-thread scalar code with the NVVM intrinsics
  ptx    PTX for the target (ld.global.v4.b32: the 128-bit loads the layout asked for)
  (cubin, the binary, is also there; `cuobjdump -sass` or triton's disassembler show its SASS)

The vector-add kernel (triton/vector_add's solution) and the matmul's tl.dot (matmul.py, one fixed
config) are compiled; the first lines of each stage are printed and all stages saved under $OUT
(run_gpu.sh: inside $OUT/logs.tar.xz) (ir_<kernel>.txt, one section per stage), with a few lines that show the lesson grepped out (layouts, wgmma, cp.async).

    python learn/basics/triton/ir_stages.py        (needs a GPU: the interpreter compiles nothing)
"""
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from basics_common import finish, load_solution, setup  # noqa: E402

args, device = setup(__doc__.split("\n")[0])
import torch  # noqa: E402

PROGRAM = "triton/ir_stages"
SHOW = {"ttir": 12, "ttgir": 14, "llir": 8, "ptx": 20}
LESSON = {"ttgir": r"#blocked|#mma|#shared|nvidia_mma|warp_group_dot|async_copy|local_alloc",
          "ptx": r"ld\.global\.v4|wgmma|mma\.sync|cp\.async|ldmatrix"}


def dump(name, compiled, out):
    saved = []
    for stage, lines in SHOW.items():
        text = compiled.asm.get(stage)
        if text is None:
            print(f"--- {name}.{stage}: not produced", flush=True)
            continue
        text = text if isinstance(text, str) else text.decode(errors="replace")
        saved.append(f"==================== {name}.{stage}\n{text}")
        all_lines = text.splitlines()
        print(f"--- {name}.{stage} ({len(all_lines)} lines, in ir_{name}.txt); first {lines}:")
        print("\n".join(all_lines[:lines]))
        if stage in LESSON:
            hits = [ln.strip() for ln in all_lines if re.search(LESSON[stage], ln)]
            print(f"    lines matching /{LESSON[stage]}/: {len(hits)}; e.g.")
            print("\n".join("      " + h[:160] for h in hits[:6]), flush=True)
    (out / f"ir_{name}.txt").write_text("\n".join(saved))  # one file per kernel, the stages in order


def main():
    if device != "cuda":
        print("ir_stages: needs a GPU (Triton's interpreter compiles nothing); skipped")
        return 0
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    add = load_solution("vector_add")
    x, y = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    o = torch.empty_like(x)
    compiled = add.add_kernel[(4,)](x, y, o, 4096, BLOCK=1024)
    ok = bool(torch.equal(o, x + y))
    dump("vector_add", compiled, out)

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import matmul  # noqa: PLC0415  (its module-level setup() sees no --small: fine, argv is ours)

    a, b = (torch.randn(256, 256, device="cuda", dtype=torch.float16) for _ in range(2))
    c = torch.empty(256, 256, device="cuda", dtype=torch.float16)
    compiled = matmul.matmul_kernel[(4,)](a, b, c, 256, 256, 256, 256, 1, 256, 1, 256, 1,
                                          BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=3)
    ok &= bool(torch.allclose(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-1))
    dump("matmul", compiled, out)
    return finish(PROGRAM, ok)


if __name__ == "__main__":
    sys.exit(main())
