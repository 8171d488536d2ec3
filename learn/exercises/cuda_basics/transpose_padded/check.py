"""Spec of cuda_basics/transpose_padded: values, coalesced global traffic, 1-way shared memory."""

from grading import Fail

from cuda_basics.common import run_transpose as run

CONCEPT = "shared-memory tiled transpose; tile[32][33] padding makes the column read conflict-free"
NEEDS_GPU = False
SIZES = ((1, 1), (33, 40), (32, 32), (8, 64))


def check(mod, rng):
    for rows, cols in SIZES + ((int(rng.integers(2, 40)), int(rng.integers(2, 40))),):
        name, st = run(mod, rng, rows, cols)
        if st.max_way() > 1:
            raise Fail(name, f"a {st.max_way()}-way shared-memory bank conflict (expected 1-way): "
                             "pad the tile to 33 columns")
