#!/usr/bin/env python3
"""learn/basics/triton/torch_op.py — a Triton kernel registered as a PyTorch operator.

torch.library.custom_op("flashlab_basics::softmax", mutates_args=()) turns the fused softmax
(triton/softmax_fused's solution) into torch.ops.flashlab_basics.softmax:

  * register_fake gives its output's shape/dtype without running it: torch.compile and the
    meta/fake-tensor machinery can trace through the call (the op stays opaque, one node);
  * register_autograd gives its backward (dx = y * (dy - sum(dy * y))) in plain torch;
  * torch.library.opcheck runs PyTorch's own consistency tests on it (schema, fake vs real,
    autograd registration);
  * torch.compile(fullgraph=True) of a function that calls it compiles without a graph break.

Then the op, the raw launcher and torch.softmax are timed on 16384 x 4096 fp32: the dispatcher's
overhead per call is the difference between the first two.

    python learn/basics/triton/torch_op.py            check, then time
    python learn/basics/triton/torch_op.py --small    tiny check only (CPU: interpreter; no compile)
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from basics_common import bench, check_close, finish, load_solution, result, setup  # noqa: E402

args, device = setup(__doc__.split("\n")[0])
import torch  # noqa: E402

sol = load_solution("softmax_fused")
PROGRAM = "triton/torch_op"


@torch.library.custom_op("flashlab_basics::softmax", mutates_args=())
def softmax(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    return sol.softmax(x, out)


@softmax.register_fake
def _(x):
    return torch.empty_like(x)


def _backward(ctx, dy):
    (y,) = ctx.saved_tensors
    return y * (dy - (dy * y).sum(dim=1, keepdim=True))


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(output)


softmax.register_autograd(_backward, setup_context=_setup_context)


def wall_us(fn, calls=2000):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def main():
    ok = True
    rows, cols = (3, 50) if args.small else (64, 1000)
    x = torch.randn(rows, cols, device=device, requires_grad=True)
    y = torch.ops.flashlab_basics.softmax(x)
    ok &= check_close("torch.ops.flashlab_basics.softmax", y, torch.softmax(x.double(), dim=1), 2e-5, 1e-9)
    dy = torch.randn_like(y)
    (gx,) = torch.autograd.grad(y, x, dy)
    xd = x.detach().double().requires_grad_()
    (gref,) = torch.autograd.grad(torch.softmax(xd, dim=1), xd, dy.double())
    ok &= check_close("its backward (register_autograd)", gx, gref, 1e-4, 1e-6)
    try:
        torch.library.opcheck(softmax, (torch.randn(rows, cols, device=device),))
        print("  validate torch.library.opcheck                 ok", flush=True)
    except Exception as e:  # noqa: BLE001  (report and go on)
        print(f"  validate torch.library.opcheck                 FAILED: {type(e).__name__}: {e}"[:600], flush=True)
        ok = False
    if args.small:
        return finish(PROGRAM, ok)

    compiled = torch.compile(lambda t: torch.ops.flashlab_basics.softmax(t) * 2.0, fullgraph=True)
    t = torch.randn(rows, cols, device=device)
    ok &= check_close("torch.compile(fullgraph=True) calling it", compiled(t), 2.0 * torch.softmax(t.double(), dim=1),
                      2e-5, 1e-9)
    rows, cols = 16384, 4096
    x = torch.randn(rows, cols, device=device)
    out = torch.empty_like(x)
    for name, fn in (("torch.ops.flashlab_basics.softmax", lambda: torch.ops.flashlab_basics.softmax(x)),
                     ("raw launcher (sol.softmax)", lambda: sol.softmax(x, out)),
                     ("torch.softmax", lambda: torch.softmax(x, dim=1))):
        result(PROGRAM, f"{name} {rows}x{cols}", bench(fn), "ms")
    # Host time per call on a tiny input (wall clock over 2000 calls: do_bench would time the GPU,
    # which is idle here): what the dispatcher adds on top of Triton's own launch path.
    x = torch.randn(4, 128, device=device)
    small_out = torch.empty_like(x)
    for name, fn in (("torch.ops.flashlab_basics.softmax", lambda: torch.ops.flashlab_basics.softmax(x)),
                     ("raw launcher (sol.softmax)", lambda: sol.softmax(x, small_out))):
        result(PROGRAM, f"{name} 4x128, host time per call", wall_us(fn), "us")
    return finish(PROGRAM, ok)


if __name__ == "__main__":
    sys.exit(main())
