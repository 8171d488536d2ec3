"""Spec of cute/copy_partition: a TV layout composed with zipped_divide's tile mode (pycute)."""

import numpy as np
from cute.common import cute, equal_table

CONCEPT = "tiled copy: (32,4) threads x (1,8) values; thread t copies rows t/4 + 32i, cols 8(t%4) + v + 32j"
NEEDS_GPU = False


def ref(t, tile, thr, vec):
    c = cute()
    (m, n), (tm, tn) = tile, thr
    z = c.zipped_divide(c.Layout((m, n), (n, 1)), (c.Layout(tm), c.Layout(tn * vec)))
    tv = c.Layout(((tn, tm), vec), ((tm * vec, 1), tm))  # (thread, value) -> m + tm * n in a block
    thrval = c.composition(z[0], tv)
    ri, rj = m // tm, n // (tn * vec)
    return np.array([[[thrval((t, v)) + z[1]((i, j)) for j in range(rj)] for i in range(ri)]
                     for v in range(vec)], np.int64)


def check(mod, rng):
    c = cute()
    cases = [((128, 64), (32, 4), 8), ((128, 64), (16, 8), 8), ((64, 128), (8, 16), 8), ((128, 32), (32, 4), 8),
             ((16, 16), (4, 2), 4)]
    for tile, thr, vec in cases:
        threads = list(range(min(32, thr[0] * thr[1]))) + [int(x) for x in rng.integers(0, thr[0] * thr[1], 8)]
        for t in threads:
            got = mod.partition(t, tile, thr, vec)
            equal_table(f"tile {tile}, threads {thr}, thread {t}", got, ref(t, tile, thr, vec),
                        what="offsets [v, i, j]")
