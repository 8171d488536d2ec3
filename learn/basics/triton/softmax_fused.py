#!/usr/bin/env python3
"""learn/basics/triton/softmax_fused.py — a fused row softmax: one read, one write, vs torch.softmax.

One program per row; the whole row sits in registers (BLOCK = next power of 2 >= n_cols, masked
with -inf), so max, exp, sum and the division happen on chip: the row crosses DRAM once each way.
The kernel is the triton/softmax_fused exercise's solution. Unfused PyTorch (x - max, exp, sum,
divide as separate ops) would move the matrix ~5 times; torch.softmax is itself one fused kernel,
the fair peer. Measured: GB/s (one read + one write) and % of torch's copy bandwidth.

    python learn/basics/triton/softmax_fused.py          check, then time 16384 x 4096 fp32
    python learn/basics/triton/softmax_fused.py --small  tiny check only
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from basics_common import bench, check_close, copy_gbps, finish, gbps, load_solution, result, setup  # noqa: E402

args, device = setup(__doc__.split("\n")[0])
import torch  # noqa: E402

sol = load_solution("softmax_fused")
PROGRAM = "triton/softmax_fused"


def unfused(x):
    m = x.max(dim=1, keepdim=True).values
    e = torch.exp(x - m)
    return e / e.sum(dim=1, keepdim=True)


def main():
    ok = True
    shapes = ((1, 1), (3, 33), (5, 250)) if args.small else ((1, 1), (3, 33), (7, 1000), (16384, 4096))
    for rows, cols in shapes:
        x = 4 * torch.randn(rows, cols, device=device)
        out = torch.full_like(x, float("nan"))
        ok &= check_close(f"softmax {rows}x{cols}", sol.softmax(x, out), torch.softmax(x.double(), dim=1),
                          2e-5, 1e-9)  # GPU: exp via ex2.approx, x - max rounded (|x - max| < 40)
    if args.small:
        return finish(PROGRAM, ok)
    rows, cols = 16384, 4096
    x = torch.randn(rows, cols, device=device)
    out = torch.empty_like(x)
    ref = copy_gbps(4 * rows * cols)
    for name, fn in (("triton fused softmax", lambda: sol.softmax(x, out)),
                     ("torch.softmax", lambda: torch.softmax(x, dim=1)),
                     ("unfused torch (max, exp, sum, div)", lambda: unfused(x))):
        bw = gbps(2 * 4 * rows * cols, bench(fn))
        result(PROGRAM, f"{name} {rows}x{cols}", bw, "GB/s", f"{100 * bw / ref:.1f} % of torch copy")
    return finish(PROGRAM, ok)


if __name__ == "__main__":
    sys.exit(main())
