#!/usr/bin/env python3
"""learn/basics/triton/block_ptr.py — block pointers: tiles described by shape, strides, offsets.

tl.make_block_ptr(base, shape, strides, offsets, block_shape, order) names a 2-D tile of a tensor;
tl.load(ptr, boundary_check=(0, 1), padding_option="zero") loads it with the edges handled (no
hand-built masks), tl.advance moves it. On Hopper Triton can lower block-pointer loads to TMA.
The kernel is the triton/block_ptr exercise's solution (out = alpha * x, a tile per program),
checked on odd shapes and on a transposed (column-major) view, then timed against torch on an
8192 x 8192 fp32 matrix, contiguous and transposed (the strides go in the block pointer; torch's
alpha * x.t() writes a contiguous result read through the transposed strides).

    python learn/basics/triton/block_ptr.py            check, then time
    python learn/basics/triton/block_ptr.py --small    tiny check only
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from basics_common import bench, check_close, copy_gbps, finish, gbps, load_solution, result, setup  # noqa: E402

args, device = setup(__doc__.split("\n")[0])
import torch  # noqa: E402

sol = load_solution("block_ptr")
PROGRAM = "triton/block_ptr"
ALPHA = 1.75


def main():
    ok = True
    blocks = dict(BLOCK_M=16, BLOCK_N=16) if args.small else dict(BLOCK_M=64, BLOCK_N=64)
    shapes = ((1, 1), (33, 17), (40, 70)) if args.small else ((1, 1), (33, 17), (1000, 777), (8192, 8192))
    for m, n in shapes:
        x = torch.randn(m, n, device=device)
        out = torch.full_like(x, float("nan"))
        ok &= check_close(f"scale {m}x{n}", sol.scale(x, out, ALPHA, **blocks), ALPHA * x, 0, 0)
        xt = torch.randn(n, m, device=device).t()  # a (m, n) view with strides (1, m)
        out = torch.full((m, n), float("nan"), device=device)
        ok &= check_close(f"scale {m}x{n} transposed view", sol.scale(xt, out, ALPHA, **blocks), ALPHA * xt, 0, 0)
    if args.small:
        return finish(PROGRAM, ok)
    n = 8192
    x, xt = torch.randn(n, n, device=device), torch.randn(n, n, device=device).t()
    out = torch.empty(n, n, device=device)
    ref = copy_gbps(4 * n * n)
    for name, fn in (("triton block ptr, contiguous", lambda: sol.scale(x, out, ALPHA, **blocks)),
                     ("torch alpha * x, contiguous", lambda: torch.mul(x, ALPHA, out=out)),
                     ("triton block ptr, transposed view", lambda: sol.scale(xt, out, ALPHA, **blocks)),
                     ("torch alpha * x.t()", lambda: torch.mul(xt, ALPHA, out=out))):
        bw = gbps(2 * 4 * n * n, bench(fn))
        result(PROGRAM, f"{name} {n}x{n}", bw, "GB/s", f"{100 * bw / ref:.1f} % of torch copy")
    return finish(PROGRAM, ok)


if __name__ == "__main__":
    sys.exit(main())
