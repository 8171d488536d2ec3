"""Spec of triton/online_softmax: several column blocks, a growing max, large values, out and lse."""
import numpy as np
from grading import close
from triton_support import Guarded, f32, launch, require  # noqa: F401  (require: check.py's hook)

CONCEPT = "online softmax over column blocks: running m and l, l rescaled by exp(m_old - m_new); LSE"
NEEDS_GPU = False


def check(mod, rng):
    for rows, cols, block, scale, shift in ((3, 1, 32, 1.0, 0.0), (4, 100, 32, 1.0, 0.0),
                                            (3, int(rng.integers(129, 250)), 64, 2.0, 0.0),
                                            (4, 70, 16, 3.0, 100.0), (2, 96, 32, 1.0, 0.0)):
        name = f"{rows} x {cols}, BLOCK {block}" + (f", values near {shift:g}" if shift else "")
        a = f32(rng, rows, cols, scale=scale) + shift
        if cols > block:  # the max grows from block to block in row 0: the rescale matters
            a[0] = np.sort(a[0]) * 1.0 + np.linspace(0, 8, cols)
        a = a.astype(np.float32).astype(np.float64)
        x, out, lse = Guarded((rows, cols), a), Guarded((rows, cols)), Guarded((rows,))
        launch(name, mod.softmax_lse, x.t, out.t, lse.t, BLOCK=block)
        out.intact(name, "out")
        lse.intact(name, "lse")
        m = a.max(axis=1, keepdims=True)
        exact_lse = (m + np.log(np.exp(a - m).sum(axis=1, keepdims=True)))[:, 0]
        close(name, lse.numpy(), exact_lse, rtol=1e-6, atol=1e-5, what="lse")
        close(name, out.numpy(), np.exp(a - exact_lse[:, None]), rtol=1e-5, atol=1e-6, what="out")
