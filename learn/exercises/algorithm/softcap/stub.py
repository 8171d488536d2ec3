"""Exercise algorithm/softcap — logit softcapping and its derivative (Gemma 2).

Softcap squashes a scaled score u smoothly into (−c, c), so one huge logit cannot swallow the
softmax (docs/algorithm.md, section 7):

    s = c · tanh(u / c)                   forward (applied before the mask)
    ds/du = 1 − tanh²(u / c) = 1 − (s / c)²

The backward gets dS (the gradient with respect to the CAPPED score s) and the capped scores
s_cap themselves (kernels recompute s, they do not keep u). Return dU = dS ∘ (1 − (s_cap / c)²);
then dQ = scale · dU K as usual. Saturated scores (|u| >> c) pass almost no gradient.
"""

import numpy as np


def softcap(u, cap):
    """u: array of scaled scores; cap > 0. Returns c · tanh(u / c)."""
    raise NotImplementedError


def softcap_backward(ds, s_cap, cap):
    """ds, s_cap: arrays of one shape (s_cap = softcap(u, cap)). Returns dU."""
    raise NotImplementedError
