"""Mutant: the forward forgets the outer factor c: tanh(u / c)."""

import numpy as np


def softcap(u, cap):
    return np.tanh(u / cap)


def softcap_backward(ds, s_cap, cap):
    return ds * (1.0 - (s_cap / cap) ** 2)
