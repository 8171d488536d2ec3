"""Spec of cuda_basics/transpose_swizzle: as transpose_padded, with an unpadded (32, 32) tile."""

from grading import Fail

from cuda_basics.common import run_transpose

CONCEPT = "XOR-swizzled shared-memory tile: element (r, c) at column c ^ r, 1-way, no padding"
NEEDS_GPU = False


def check(mod, rng):
    for rows, cols in ((1, 1), (33, 40), (32, 32), (int(rng.integers(2, 40)), int(rng.integers(2, 40)))):
        name, st = run_transpose(mod, rng, rows, cols)
        if st.smem_bytes != 32 * 32 * 4:
            raise Fail(name, f"{st.smem_bytes} bytes of shared memory; use one unpadded (32, 32) float32 tile")
        if st.max_way() > 1:
            raise Fail(name, f"a {st.max_way()}-way shared-memory bank conflict (expected 1-way): swizzle "
                             "the column as c ^ r on both the write and the read")
