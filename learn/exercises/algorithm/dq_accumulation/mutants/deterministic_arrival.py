"""Mutant: dq_deterministic adds in arrival order: the bits change from run to run."""

import numpy as np


def dq_atomic(partials, order):
    acc = np.zeros_like(partials[0], dtype=np.float32)
    for j in order:
        acc = acc + partials[j]
    return acc


def dq_deterministic(partials, order):
    acc = np.zeros_like(partials[0], dtype=np.float32)
    for j in order:
        acc = acc + partials[j]
    return acc
