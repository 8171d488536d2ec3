"""Mutant: subtracts D outside the product: P ∘ dP − D (masked entries get −D)."""

import numpy as np


def softmax_grad(p, dp, D):
    return p * dp - D[:, None]
