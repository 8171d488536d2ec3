"""Spec of triton/flash_forward: O and LSE against the float64 dense reference; causal bottom-right,
Nq != Nk both ways (rows that see no key), partial blocks."""
import numpy as np
import reference
from grading import close
from triton_support import Guarded, f32, launch, on_gpu, require  # noqa: F401  (require: hook)

CONCEPT = "FlashAttention forward in Triton: a query block, loop over key blocks, online softmax, causal mask"
NEEDS_GPU = False


def check(mod, rng):
    rtol = 1e-2 if on_gpu() else 2e-5  # tl.dot of float32 is TF32 on a GPU
    cases = ((32, 32, 16, True), (40, 23, 16, True), (int(rng.integers(5, 30)), 50, 16, True),
             (33, 45, 32, False), (int(rng.integers(17, 40)), int(rng.integers(17, 40)), 32, True))
    for nq, nk, d, causal in cases:
        name = f"Nq {nq} Nk {nk} d {d}" + (" causal" if causal else "")
        q, k, v = f32(rng, nq, d), f32(rng, nk, d), f32(rng, nk, d)
        scale = float(np.float32(1.0 / np.sqrt(d)))
        Q, K, V = Guarded((nq, d), q), Guarded((nk, d), k), Guarded((nk, d), v)
        O, L = Guarded((nq, d)), Guarded((nq,))
        launch(name, mod.attention, Q.t, K.t, V.t, O.t, L.t, scale, causal)
        O.intact(name, "o")
        L.intact(name, "lse")
        ref = reference.forward(q, k, v, scale, causal=causal)
        close(name, L.numpy(), ref["lse"], rtol=rtol, atol=1e-5, what="lse")
        close(name, O.numpy(), ref["out"], rtol=rtol, atol=1e-5, what="o")
