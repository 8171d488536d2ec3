"""Helpers of the cute checks: CuTe's layout algebra as the oracle (CUTLASS's pycute), and tables.

pycute ships with the pinned CUTLASS that tools/setup.sh installs into .deps/cutlass; it is imported
from there by path (FLASHLAB_CUTLASS_DIR overrides the folder). Without it every cute exercise is
reported as skip. The learner's code never imports pycute: it computes the answers by hand.
"""

import importlib
import os
import sys
from pathlib import Path

import numpy as np
from grading import Fail, Skip

REPO = Path(__file__).resolve().parents[3]


def cute():
    """The pycute module, or Skip when .deps/cutlass is missing."""
    root = Path(os.environ.get("FLASHLAB_CUTLASS_DIR", REPO / ".deps" / "cutlass"))
    if not (root / "pycute" / "layout.py").is_file():
        raise Skip(f"needs CUTLASS's pycute ({root}/pycute not found): run tools/setup.sh")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return importlib.import_module("pycute")


def table(layout):
    """All values of a layout as an array over its flattened shape (coordinate order = CuTe's)."""
    c = cute()
    flat = c.flatten(layout.shape) if c.is_tuple(layout.shape) else (layout.shape,)
    vals = [layout(i) for i in range(c.size(layout))]
    return np.array(vals, np.int64).reshape(tuple(flat), order="F")


def as_layout(check, got, what="layout"):
    """A learner's (shape, stride) pair as a pycute Layout; Fail when it is not one."""
    c = cute()
    try:
        shape, stride = got
        if c.is_tuple(shape) != c.is_tuple(stride) or (
                c.is_tuple(shape) and len(c.flatten(shape)) != len(c.flatten(stride))):
            raise ValueError("shape and stride are not congruent")
        return c.Layout(shape, stride)
    except Exception as e:
        raise Fail(check, f"{what}: expected a (shape, stride) pair of congruent ints/tuples, got {got!r} ({e})")


def mode_sizes(layout):
    c = cute()
    return tuple(c.size(layout[i]) for i in range(len(layout))) if c.is_tuple(layout.shape) else (layout.shape,)


def same_function(check, got, exp, what="layout", ranks=True):
    """got (a (shape, stride) pair) and the pycute layout exp are the same function of the same
    1-D domain; with ranks, also the same top-level mode sizes."""
    c = cute()
    g = as_layout(check, got, what)
    if c.size(g) != c.size(exp):
        raise Fail(check, f"{what}: size {c.size(g)} ({g}), expected {c.size(exp)}")
    if ranks and mode_sizes(g) != mode_sizes(exp):
        raise Fail(check, f"{what} {g}: mode sizes {mode_sizes(g)}, expected {mode_sizes(exp)}")
    for i in range(c.size(exp)):
        if g(i) != exp(i):
            raise Fail(check, f"{what} {g}: index {i} -> {g(i)}, expected {exp(i)} (a layout equal to {exp})")


def same_layout(check, got, exp, what="layout"):
    """Exactly the shape and stride of exp (ints compared as ints)."""
    g = as_layout(check, got, what)
    if g.shape != exp.shape or g.stride != exp.stride:
        raise Fail(check, f"{what}: got {g}, expected {exp}")


def equal_table(check, got, exp, what="table"):
    got = np.asarray(got)
    exp = np.asarray(exp)
    if got.shape != exp.shape:
        raise Fail(check, f"{what}: shape {got.shape}, expected {exp.shape}")
    bad = np.argwhere(got != exp)
    if len(bad):
        idx = tuple(int(i) for i in bad[0])
        raise Fail(check, f"{what}: {len(bad)} of {got.size} entries differ; first at {idx}: got "
                          f"{got[idx].item()}, expected {exp[idx].item()}")


def blocked_product(a, b):
    """CuTe's blocked_product (pycute has none): logical_product, then zip ((A0, B0), (A1, B1))."""
    c = cute()
    r = c.logical_product(a, b)
    return c.make_layout(c.make_layout(r[0][i], r[1][i]) for i in range(len(a)))


def raked_product(a, b):
    """CuTe's raked_product: logical_product, then zip ((B0, A0), (B1, A1))."""
    c = cute()
    r = c.logical_product(a, b)
    return c.make_layout(c.make_layout(r[1][i], r[0][i]) for i in range(len(a)))


def rand_compact(rng, shape, row_major=None):
    """A compact layout of shape, row- or column-major (random when row_major is None)."""
    c = cute()
    if row_major is None:
        row_major = bool(rng.integers(2))
    shape = tuple(int(s) for s in shape)
    if row_major:
        return c.Layout(shape, tuple(reversed(c.prefix_product(tuple(reversed(shape))))))
    return c.Layout(shape, c.prefix_product(shape))


def pow2(rng, lo, hi):
    return 1 << int(rng.integers(lo, hi + 1))


def flashlab_smem(rows, hdim, swizzled=True):
    """flashlab's SmemLayoutQ/KV (src/cuda/sm80/kernel_traits.h) for 16-bit elements:
    tile_to_shape(Swizzle<B,3,3> o (8, K):(K, 1), (rows, hdim)), K = 64 if hdim % 64 == 0 else 32,
    B = 3 for K = 64, 2 for K = 32 (tile_to_shape is a blocked_product, tiles down the rows first).
    Without swizzled: the same tiling with no swizzle (get_nonswizzle_portion)."""
    c = cute()
    k = 64 if hdim % 64 == 0 else 32
    tiled = blocked_product(c.Layout((8, k), (k, 1)), c.Layout((rows // 8, hdim // k)))
    if not swizzled:
        return tiled
    return c.ComposedLayout(c.Swizzle(3 if k == 64 else 2, 3, 3), 0, tiled)
