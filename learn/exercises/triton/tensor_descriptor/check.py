"""Spec of triton/tensor_descriptor: ragged last tiles of every sequence, batch > 1 (the next
sequence's rows follow in memory), heads != batch, nothing written outside out."""
import numpy as np
from grading import close, Fail  # noqa: F401
from triton_support import Guarded, f32, launch, require  # noqa: F401  (require: check.py's hook)

CONCEPT = "tensor descriptors (TMA): a 4-D box per tile, zero-filled past a sequence's end, clipped stores"
NEEDS_GPU = False


def expected(x, block_s):
    batch, seqlen, heads, dim = x.shape
    tiles = -(-seqlen // block_s)
    out = np.zeros((batch, tiles, heads, dim))
    for t in range(tiles):
        out[:, t] = x[:, t * block_s:(t + 1) * block_s].sum(axis=1)
    return out


def check(mod, rng):
    for batch, seqlen, heads, dim, block_s in ((1, 16, 1, 16, 16), (3, 37, 2, 16, 16),
                                               (2, int(rng.integers(17, 60)), 3, 32, 16), (4, 9, 1, 8, 8)):
        name = f"x {batch} x {seqlen} x {heads} x {dim}, tiles of {block_s}"
        x = f32(rng, batch, seqlen, heads, dim)
        X = Guarded(x.shape, x)
        tiles = -(-seqlen // block_s)
        out = Guarded((batch, tiles, heads, dim), np.full((batch, tiles, heads, dim), -3.0))
        launch(name, mod.tile_sums, X.t, out.t, block_s)
        out.intact(name, "out", fix="store one (1, 1, 1, dim) box per program")
        want = expected(x, block_s)
        got = out.numpy()
        if seqlen % block_s and batch > 1:
            last = tiles - 1
            tail = x[1:, :block_s - seqlen % block_s].sum(axis=1)   # the next sequence's first rows
            if np.allclose(got[:-1, last], want[:-1, last] + tail, rtol=1e-5, atol=1e-5) and \
                    not np.allclose(got[:-1, last], want[:-1, last], rtol=1e-5, atol=1e-5):
                raise Fail(name, f"out[b, {last}]: the last tile of a sequence also summed the next sequence's "
                                 "first rows: describe x in 4-D (batch, seqlen, heads, dim), so that rows past "
                                 "seqlen are outside the tensor and read as zero")
        close(name, got, want, rtol=1e-5, atol=1e-5, what="out")
