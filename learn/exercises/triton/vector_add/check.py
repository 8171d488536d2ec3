"""Spec of triton/vector_add: values on awkward n, no access past either end (guard values)."""
from grading import close
from triton_support import Guarded, f32, launch, require  # noqa: F401  (require: check.py's hook)

CONCEPT = "Triton basics: program_id, tl.arange offsets, masked load/store for the ragged tail"
NEEDS_GPU = False


def check(mod, rng):
    for n, block in ((1, 64), (127, 64), (129, 64), (64, 64), (int(rng.integers(200, 400)), 128)):
        name = f"n {n}, BLOCK {block}"
        a, b = f32(rng, n), f32(rng, n)
        x, y, out = Guarded((n,), a), Guarded((n,), b), Guarded((n,))
        launch(name, mod.add, x.t, y.t, out.t, BLOCK=block)
        out.intact(name, "out")
        close(name, out.numpy(), a + b, rtol=1e-6, atol=1e-6, what="out")
