"""Mutant: the emitted stride is r, not r * d_k (A's stride forgotten)."""


def leaves(t):
    return [x for s in t for x in leaves(s)] if isinstance(t, tuple) else [t]


def coalesce(shape, stride):
    rs, rd = [1], [0]
    for s, d in zip(leaves(shape), leaves(stride)):
        if s == 1:
            continue
        if rs[-1] == 1:
            rs[-1], rd[-1] = s, d
        elif rs[-1] * rd[-1] == d:
            rs[-1] *= s
        else:
            rs.append(s)
            rd.append(d)
    return rs, rd


def compose1(a, n, r):
    if r == 0:
        return n, 0
    shapes, strides = coalesce(*a)
    rs, rd = [], []
    for s, d in zip(shapes[:-1], strides[:-1]):
        new = min(max(1, s // r), n)
        if new != 1:
            rs.append(new)
            rd.append(r)
        n //= new
        r = -(-r // s)
    if n != 1 or not rs:
        rs.append(n)
        rd.append(r * strides[-1])
    return (rs[0], rd[0]) if len(rs) == 1 else (tuple(rs), tuple(rd))


def compose(a, b):
    bs, bd = b
    if isinstance(bs, tuple):
        parts = [compose1(a, s, d) for s, d in zip(bs, bd)]
        return tuple(p[0] for p in parts), tuple(p[1] for p in parts)
    return compose1(a, bs, bd)
