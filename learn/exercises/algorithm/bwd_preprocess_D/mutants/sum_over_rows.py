"""Mutant: sums over the wrong axis (a column sum, shape (d,))."""

import numpy as np


def preprocess_D(o, do):
    return (do * o).sum(axis=0)
