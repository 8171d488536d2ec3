"""Mutant: the backward applies tanh to the already capped score: 1 − tanh²(s_cap / c)."""

import numpy as np


def softcap(u, cap):
    return cap * np.tanh(u / cap)


def softcap_backward(ds, s_cap, cap):
    return ds * (1.0 - np.tanh(s_cap / cap) ** 2)
