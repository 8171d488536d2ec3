"""What the compiler made of each kernel, without a GPU: shared memory, registers, spills, MMAs.

    python -m flashlab.triton.resources [--arch 90] [--hdims 64,128,256] [--dtype bf16]

Compiles every flashlab.triton kernel ahead of time for the given compute capability (Triton's
own ptxas; no device needed), with the default tile configurations and the specializations a
typical call gets (contiguous head dim, 16-aligned strides, MHA), then reads ptxas's report and
counts instructions in the PTX: wgmma (Hopper's warpgroup MMA), mma.sync (Ampere's), cp.async
(the asynchronous global-to-shared copies of the software pipeline), cp.async.bulk.tensor (TMA
copies: fa2_tma.py's tiles). A configuration that spills
registers or wants more than 227 KiB of shared memory shows here before it costs device time.
"""
import argparse
import os
import re
import subprocess
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from . import fa1, fa2, fa2_tma

PTR_F32 = {"LSE", "DELTA", "M", "L"}
FLOATS = {"qk_scale", "softmax_scale"}


def ptxas_path():
    import triton.backends.nvidia as nv
    return os.path.join(os.path.dirname(nv.__file__), "bin", "ptxas")


def compile_for(jitfn, arch, dtype, consts, cfg, fp32_ptrs=()):
    """Compile like a launch would specialize it: head-dim strides = 1, other strides and all
    pointers 16-divisible, group = 1 (MHA); a TMA descriptor argument (desc_q, desc_k, ...) boxes
    one tile of one head, (1, BLOCK_M or BLOCK_N rows, 1, HEAD_DIM)."""
    names = jitfn.arg_names
    sig, consts = {}, dict(consts)
    for n in names:
        if n in consts:
            sig[n] = "constexpr"
        elif n.startswith("desc_"):
            rows = consts["BLOCK_M"] if n in ("desc_q", "desc_o") else consts["BLOCK_N"]
            sig[n] = f"tensordesc<{dtype}[1,{rows},1,{consts['HEAD_DIM']}]>"
        elif n.isupper():                                   # tensors are the upper-case arguments
            sig[n] = "*fp32" if n in PTR_F32 or n in fp32_ptrs else f"*{dtype}"
        elif n in FLOATS:
            sig[n] = "fp32"
        elif re.fullmatch(r"s[a-z]*d", n) or n == "group":   # stride of head_dim, GQA group
            sig[n], consts[n] = "constexpr", 1
        else:
            sig[n] = "i32"
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names)
             if sig[n].startswith("*") or (sig[n] == "i32" and n.startswith("s") and not n.startswith("seqlen"))}
    src = ASTSource(fn=jitfn, signature=sig, constexprs={(names.index(k),): v for k, v in consts.items()}, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", arch, 32),
                          options={"num_warps": cfg.num_warps, "num_stages": cfg.num_stages})


def describe(kernel, arch):
    ptx = kernel.asm["ptx"]
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as fh:
        fh.write(ptx)
    try:
        gpu = f"sm_{arch}a" if arch >= 90 else f"sm_{arch}"
        report = subprocess.run([ptxas_path(), f"-arch={gpu}", "-v", fh.name, "-o", os.devnull],
                                capture_output=True, text=True).stderr
    finally:
        os.unlink(fh.name)
    regs = re.search(r"Used (\d+) registers", report)
    spills = re.search(r"(\d+) bytes spill stores", report)
    return {"smem_kib": kernel.metadata.shared / 1024, "regs": int(regs.group(1)) if regs else -1,
            "spill_bytes": int(spills.group(1)) if spills else -1, "wgmma": ptx.count("wgmma.mma_async"),
            "mma_sync": ptx.count("mma.sync"), "cp_async": ptx.count("cp.async.") - ptx.count("cp.async.bulk"),
            "tma": ptx.count("cp.async.bulk.tensor")}


def kernels(head_dim, causal):
    """(label, jit function, config, fp32 pointer arguments) for every kernel at this head_dim."""
    fwd, (dkdv, dq) = fa2.fwd_config(head_dim), fa2.bwd_configs(head_dim)
    f1, b1 = fa1.fa1_config(head_dim), fa1.fa1_config(head_dim, backward=True)
    return [("fa2 forward", fa2._fwd_kernel, fwd, ()), ("fa2_tma forward", fa2_tma._fwd_tma_kernel, fwd, ()),
            ("fa2 dK/dV", fa2._bwd_dkdv_kernel, dkdv, ()),
            ("fa2 dQ", fa2._bwd_dq_kernel, dq, ()), ("fa1 forward", fa1._fa1_fwd_kernel, f1, ("O",)),
            ("fa1 backward", fa1._fa1_bwd_kernel, b1, ("DQ",))]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--hdims", default="64,128,256")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    args = ap.parse_args(argv)
    print(f"flashlab.triton kernels compiled for sm_{args.arch} ({args.dtype}), triton {triton.__version__}")
    print("| kernel | head_dim | causal | tiles | smem KiB | regs | spill bytes | wgmma | mma.sync | cp.async | TMA |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for d in (int(x) for x in args.hdims.split(",")):
        for causal in (False, True):
            for label, fn, cfg, f32 in kernels(d, causal):
                consts = dict(CAUSAL=causal, HEAD_DIM=d, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n)
                try:
                    r = describe(compile_for(fn, args.arch, args.dtype, consts, cfg, f32), args.arch)
                    print(f"| {label} | {d} | {int(causal)} | {cfg} | {r['smem_kib']:.1f} | {r['regs']} | "
                          f"{r['spill_bytes']} | {r['wgmma']} | {r['mma_sync']} | {r['cp_async']} | {r['tma']} |",
                          flush=True)
                except Exception as e:  # noqa: BLE001 - report and go on
                    print(f"| {label} | {d} | {int(causal)} | {cfg} | failed: {str(e).splitlines()[0][:80]} |")


if __name__ == "__main__":
    main()
