"""What every exercise checker uses: the failure type, comparisons, and random inputs.

A check raises Fail(check, message); `check` names the test that caught the problem (learn/check.py
prints it, and in --mutants mode it says which check caught which mutant). Comparisons never let a
NaN pass: a value must be finite wherever the reference is finite, and -inf exactly where the
reference is -inf.
"""

import numpy as np


class Fail(Exception):
    def __init__(self, check, message):
        super().__init__(f"[{check}] {message}")
        self.check = check
        self.message = message


class Skip(Exception):
    """Raised by a check that cannot run here (a missing dependency): reported as skip, not fail."""


def randn(rng, *shape, scale=1.0):
    """Normal float64 values, never exactly zero (a zero input hides missing terms)."""
    x = rng.standard_normal(shape)
    x[x == 0] = 0.5
    return scale * x


def close(check, got, exact, rtol=1e-9, atol=1e-9, what="value"):
    """|got - exact| <= atol + rtol * max|exact| elementwise; shapes equal; infinities exact."""
    if isinstance(got, tuple) or isinstance(got, list):
        got = np.array(got, dtype=np.float64)
    try:
        got = np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise Fail(check, f"{what}: not a numeric array ({e})")
    exact = np.asarray(exact, dtype=np.float64)
    if got.shape != exact.shape:
        raise Fail(check, f"{what}: shape {got.shape}, expected {exact.shape}")
    if np.isnan(got).any():
        idx = tuple(int(i) for i in np.argwhere(np.isnan(got))[0])
        raise Fail(check, f"{what}: NaN at index {idx} (expected {float(exact[idx])!r}); NaN never passes "
                          "(a row with no visible key gives 0 / -inf, not 0/0 = NaN)")
    inf_got, inf_exp = ~np.isfinite(got), ~np.isfinite(exact)
    bad = (inf_got != inf_exp) | (inf_exp & (got != exact))
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise Fail(check, f"{what}: {float(got[idx])!r} at index {idx}, expected {float(exact[idx])!r} "
                          "(infinities must match exactly)")
    fin = np.isfinite(exact)
    if not fin.any():
        return
    with np.errstate(invalid="ignore"):
        err = np.where(fin, np.abs(got - exact), 0.0)
    tol = atol + rtol * np.abs(exact[fin]).max()
    if err.max() > tol:
        idx = tuple(int(i) for i in np.unravel_index(np.argmax(err), err.shape))
        raise Fail(check, f"{what}: max error {err.max():.3e} > tol {tol:.1e} at index {idx} "
                          f"(got {got[idx]:.6g}, expected {exact[idx]:.6g})")


def equal(check, got, expected, what="value"):
    """Exact equality (integers, lists, bit patterns)."""
    if isinstance(expected, np.ndarray) or isinstance(got, np.ndarray):
        g, e = np.asarray(got), np.asarray(expected)
        if g.shape != e.shape:
            raise Fail(check, f"{what}: shape {g.shape}, expected {e.shape}")
        if not np.array_equal(g, e):
            diff = np.argwhere(g != e)
            idx = tuple(int(i) for i in diff[0])
            raise Fail(check, f"{what}: {len(diff)} of {g.size} elements differ; first at {idx}: "
                              f"got {g[idx].item()!r}, expected {e[idx].item()!r}")
    elif got != expected:
        raise Fail(check, f"{what}: got {got!r}, expected {expected!r}")


def _short(a):
    s = np.array2string(np.asarray(a), threshold=12, precision=6)
    return s if len(s) < 200 else s[:200] + "..."


def same_interval(check, got, exp):
    """A key interval (lo, hi): equal to exp, or empty (hi < lo) when exp is empty."""
    try:
        lo, hi = (int(x) for x in got)
    except Exception:
        raise Fail(check, f"expected a pair (lo, hi) of ints, got {got!r}")
    if exp[1] < exp[0]:
        if hi >= lo:
            raise Fail(check, f"got ({lo}, {hi}); this row sees no key (expected an empty interval, hi < lo)")
    elif (lo, hi) != tuple(exp):
        raise Fail(check, f"got ({lo}, {hi}), expected {tuple(exp)}")
