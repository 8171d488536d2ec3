#!/usr/bin/env python3
"""learn/basics/triton/online_softmax.py — softmax of rows too long for one block: the online form.

The row is walked in BLOCK-column chunks with a running max m and sum l: a chunk with a larger
maximum rescales the sum, l <- l * exp(m_old - m_new) + sum exp(x - m_new). A second walk writes
exp(x - lse) with lse = m + log l, also returned (what FlashAttention keeps for its backward). The
kernel is the triton/online_softmax exercise's solution. Checked against torch.softmax and
torch.logsumexp in float64, then timed against torch.softmax (+ logsumexp) on 4096 x 32768 fp32:
rows of 128 KB, which would not fit one program's registers as a single block.

    python learn/basics/triton/online_softmax.py          check, then time
    python learn/basics/triton/online_softmax.py --small  tiny check only
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from basics_common import bench, check_close, copy_gbps, finish, gbps, load_solution, result, setup  # noqa: E402

args, device = setup(__doc__.split("\n")[0])
import torch  # noqa: E402

sol = load_solution("online_softmax")
PROGRAM = "triton/online_softmax"


def main():
    ok = True
    block = 32 if args.small else 2048
    shapes = ((1, 1), (3, 100), (2, 300)) if args.small else ((1, 1), (3, 100), (5, 5000), (4096, 32768))
    for rows, cols in shapes:
        x = 4 * torch.randn(rows, cols, device=device)
        out, lse = torch.full_like(x, float("nan")), torch.full((rows,), float("nan"), device=device)
        sol.softmax_lse(x, out, lse, BLOCK=block)
        xd = x.double()
        ok &= check_close(f"out {rows}x{cols}", out, torch.softmax(xd, dim=1), 5e-5, 1e-9)
        ok &= check_close(f"lse {rows}x{cols}", lse, torch.logsumexp(xd, dim=1), 1e-6, 5e-5)
    if args.small:
        return finish(PROGRAM, ok)
    rows, cols = 4096, 32768
    x = torch.randn(rows, cols, device=device)
    out, lse = torch.empty_like(x), torch.empty(rows, device=device)
    ref = copy_gbps(4 * rows * cols)
    for name, fn in (("triton online softmax + lse (BLOCK 2048)", lambda: sol.softmax_lse(x, out, lse, BLOCK=block)),
                     ("torch.softmax", lambda: torch.softmax(x, dim=1)),
                     ("torch.softmax + torch.logsumexp", lambda: (torch.softmax(x, dim=1), torch.logsumexp(x, dim=1)))):
        bw = gbps(2 * 4 * rows * cols, bench(fn))  # compulsory traffic: one read, one write
        result(PROGRAM, f"{name} {rows}x{cols}", bw, "GB/s", f"{100 * bw / ref:.1f} % of torch copy")
    return finish(PROGRAM, ok)


if __name__ == "__main__":
    sys.exit(main())
