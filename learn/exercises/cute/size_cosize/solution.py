"""Solution for cute/size_cosize (the task is in stub.py)."""


def leaves(t):
    return [x for s in t for x in leaves(s)] if isinstance(t, tuple) else [t]


def size(shape):
    n = 1
    for s in leaves(shape):
        n *= s
    return n


def cosize(shape, stride):
    return 1 + sum((s - 1) * d for s, d in zip(leaves(shape), leaves(stride)))
