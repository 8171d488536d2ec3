"""Mutant: a mean over the row instead of the sum."""

import numpy as np


def preprocess_D(o, do):
    return (do * o).mean(axis=1)
