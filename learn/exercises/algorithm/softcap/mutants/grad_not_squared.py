"""Mutant: the derivative as 1 − |s / c| (not squared)."""

import numpy as np


def softcap(u, cap):
    return cap * np.tanh(u / cap)


def softcap_backward(ds, s_cap, cap):
    return ds * (1.0 - np.abs(s_cap / cap))
