"""Mutant: forgets the − D term: dS = P ∘ dP."""

import numpy as np


def softmax_grad(p, dp, D):
    return p * dp
