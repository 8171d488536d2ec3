"""Mutant: cosize = the largest offset, the + 1 forgotten."""


def leaves(t):
    return [x for s in t for x in leaves(s)] if isinstance(t, tuple) else [t]


def size(shape):
    n = 1
    for s in leaves(shape):
        n *= s
    return n


def cosize(shape, stride):
    return sum((s - 1) * d for s, d in zip(leaves(shape), leaves(stride)))
