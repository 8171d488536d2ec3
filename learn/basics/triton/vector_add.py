#!/usr/bin/env python3
"""learn/basics/triton/vector_add.py — the first Triton kernel: out = x + y, against torch.

One program (a CUDA block's worth of work) per BLOCK elements: offs = pid * BLOCK + arange(BLOCK),
mask = offs < n guards the ragged tail. The kernel is the triton/vector_add exercise's solution.
Triton picks the per-thread vector width itself (BLOCK 1024, 4 warps: 8 floats per thread, two
128-bit loads). Measured: GB/s of Triton and of torch's x + y, as % of torch's copy bandwidth.

    python learn/basics/triton/vector_add.py            check, then time (64M floats)
    python learn/basics/triton/vector_add.py --small    tiny check only (CPU: Triton's interpreter)
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from basics_common import bench, check_close, copy_gbps, finish, gbps, load_solution, result, setup  # noqa: E402

args, device = setup(__doc__.split("\n")[0])
import torch  # noqa: E402

sol = load_solution("vector_add")
PROGRAM = "triton/vector_add"


def main():
    ok = True
    for n in (1, 1000, 98_307) if args.small else (1, 1000, 98_307, 1 << 26):
        x, y = (torch.randn(n, device=device) for _ in range(2))
        out = torch.full_like(x, float("nan"))
        ok &= check_close(f"add n={n}", sol.add(x, y, out, BLOCK=64 if args.small else 1024), x + y, 0, 0)
    if args.small:
        return finish(PROGRAM, ok)
    n = 1 << 26
    x, y, out = (torch.randn(n, device=device) for _ in range(3))
    ref = copy_gbps(4 * n)
    moved = 3 * 4 * n  # two reads, one write
    for name, fn in (("triton add (BLOCK 1024)", lambda: sol.add(x, y, out, BLOCK=1024)),
                     ("torch x + y", lambda: torch.add(x, y, out=out))):
        bw = gbps(moved, bench(fn))
        result(PROGRAM, name, bw, "GB/s", f"{100 * bw / ref:.1f} % of torch copy ({ref:.0f} GB/s)")
    return finish(PROGRAM, ok)


if __name__ == "__main__":
    sys.exit(main())
