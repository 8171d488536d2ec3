"""Spec of triton/block_ptr: edge tiles on both sides, a strided input, nothing written outside out."""
import numpy as np
from grading import close, Fail
from triton_support import Guarded, f32, launch, require  # noqa: F401  (require: check.py's hook)

CONCEPT = "block pointers: tl.make_block_ptr over a strided tensor, boundary_check on edge tiles"
NEEDS_GPU = False


def check(mod, rng):
    for m, n in ((16, 16), (17, 5), (int(rng.integers(17, 40)), 40), (9, int(rng.integers(33, 60)))):
        name = f"{m} x {n}"
        alpha = float(np.float32(rng.uniform(1.5, 3.0)))
        a = f32(rng, m, n)
        wide = 7  # x is a column slice of an (m, n + 7) matrix
        X = Guarded((m, n + wide), np.concatenate([a, np.full((m, wide), 5.0)], axis=1))
        out_wide = Guarded((m, n + wide), np.full((m, n + wide), -3.0))  # out too: columns past n exist
        launch(name, mod.scale, X.t[:, :n], out_wide.t[:, :n], alpha)
        out_wide.intact(name, "out", fix="clip the edge tiles (boundary_check)")
        got = out_wide.numpy()
        if (got[:, n:] != -3.0).any():
            r, c = (int(i) for i in np.argwhere(got[:, n:] != -3.0)[0])
            raise Fail(name, f"out: a store went past column {n - 1} of row {r} (to column {n + c}): "
                             "a tile that sticks out must be clipped (boundary_check)")
        close(name, got[:, :n], alpha * a, rtol=1e-6, atol=1e-6, what="out")
