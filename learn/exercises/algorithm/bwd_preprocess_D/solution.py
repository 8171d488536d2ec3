"""Solution for algorithm/bwd_preprocess_D (the task is in stub.py)."""

import numpy as np


def preprocess_D(o, do):
    return (do * o).sum(axis=1)
