"""Mutant: uses dO ∘ dO (the wrong operand) instead of dO ∘ O."""

import numpy as np


def preprocess_D(o, do):
    return (do * do).sum(axis=1)
