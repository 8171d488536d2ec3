"""Spec of triton/softmax_fused: awkward widths, strided rows, values near 100 (overflow without the max)."""
import numpy as np
from grading import close
from triton_support import Guarded, f32, launch, require  # noqa: F401  (require: check.py's hook)

CONCEPT = "fused row softmax: one program per row, -inf padding, max subtracted before exp"
NEEDS_GPU = False


def reference(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def check(mod, rng):
    for rows, cols, scale, shift in ((3, 1, 1.0, 0.0), (4, 37, 1.0, 0.0), (5, 64, 2.0, 0.0),
                                     (3, int(rng.integers(65, 200)), 1.0, 0.0), (4, 50, 3.0, 100.0)):
        name = f"{rows} x {cols}" + (f", values near {shift:g}" if shift else "")
        a = f32(rng, rows, cols, scale=scale) + shift
        a = a.astype(np.float32).astype(np.float64)
        pad = 3  # x is a column slice of a wider matrix: row stride cols + 3
        xg = Guarded((rows, cols + pad), np.concatenate([a, np.full((rows, pad), 7.0)], axis=1))
        out = Guarded((rows, cols))
        launch(name, mod.softmax, xg.t[:, :cols], out.t)
        out.intact(name, "out")
        close(name, out.numpy(), reference(a), rtol=1e-5, atol=1e-6, what="out")
