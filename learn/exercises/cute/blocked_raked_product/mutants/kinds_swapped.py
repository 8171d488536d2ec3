"""Mutant: blocked and raked confused (each returns the other's layout)."""

import numpy as np


def at(layout, r, c):
    (_, _), (d0, d1) = layout
    return r * d0 + c * d1


def raked(a, b):
    (a0, a1), (b0, b1) = a[0], b[0]
    r, c = np.meshgrid(np.arange(a0 * b0), np.arange(a1 * b1), indexing="ij")
    return at(a, r % a0, c % a1) + a0 * a1 * at(b, r // a0, c // a1)


def blocked(a, b):
    (a0, a1), (b0, b1) = a[0], b[0]
    r, c = np.meshgrid(np.arange(a0 * b0), np.arange(a1 * b1), indexing="ij")
    return at(a, r // b0, c // b1) + a0 * a1 * at(b, r % b0, c % b1)
