"""Solution for algorithm/dq_accumulation (the task is in stub.py)."""

import numpy as np


def dq_atomic(partials, order):
    acc = np.zeros_like(partials[0], dtype=np.float32)
    for j in order:
        acc = acc + partials[j]
    return acc


def dq_deterministic(partials, order):
    acc = np.zeros_like(partials[0], dtype=np.float32)
    for j in sorted(order):
        acc = acc + partials[j]
    return acc
