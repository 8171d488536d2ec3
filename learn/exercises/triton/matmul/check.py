"""Spec of triton/matmul: awkward M, N, K (partial tiles on every side), a transposed operand."""
import numpy as np
from grading import close
from triton_support import Guarded, f32, launch, on_gpu, require  # noqa: F401  (require: hook)

CONCEPT = "tiled matmul: a program per C tile, K loop with tl.dot into an fp32 accumulator, masked tails"
NEEDS_GPU = False


def check(mod, rng):
    rtol = 1e-2 if on_gpu() else 1e-5  # tl.dot of float32 is TF32 on a GPU (10-bit mantissa)
    for m, n, k, trans in ((16, 16, 16, False), (33, 20, 37, False), (int(rng.integers(17, 48)), 40, 50, True),
                           (7, 50, int(rng.integers(17, 70)), False), (20, 9, 1, False)):
        name = f"M {m} N {n} K {k}" + (", B transposed in memory" if trans else "")
        a, b = f32(rng, m, k), f32(rng, k, n)
        A = Guarded((m, k), a)
        if trans:  # b is the transpose of a contiguous (n, k) tensor: stride_bk = 1
            Bt = Guarded((n, k), b.T)
            bt = Bt.t.T
        else:
            bt = Guarded((k, n), b).t
        C = Guarded((m, n))
        launch(name, mod.matmul, A.t, bt, C.t)
        C.intact(name, "c")
        close(name, C.numpy(), a @ b, rtol=rtol, atol=1e-5, what="c")
