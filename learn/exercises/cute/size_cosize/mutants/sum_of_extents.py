"""Mutant: cosize = sum of shape_i * stride_i (extents added, not the last offset + 1)."""


def leaves(t):
    return [x for s in t for x in leaves(s)] if isinstance(t, tuple) else [t]


def size(shape):
    n = 1
    for s in leaves(shape):
        n *= s
    return n


def cosize(shape, stride):
    return sum(s * d for s, d in zip(leaves(shape), leaves(stride)))
