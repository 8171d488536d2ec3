"""Solution for cute/right_inverse (the task is in stub.py)."""


def leaves(t):
    return [x for s in t for x in leaves(s)] if isinstance(t, tuple) else [t]


def right_inverse(shape, stride):
    sh, st = leaves(shape), leaves(stride)
    pre, p = [], 1
    for s in sh:
        pre.append(p)
        p *= s
    rs, rd, cur = [], [], 1
    for d, s, q in sorted(zip(st, sh, pre)):
        if s == 1:
            continue
        if d != cur:
            break
        rs.append(s)
        rd.append(q)
        cur = s * d
    return (tuple(rs), tuple(rd)) if rs else (1, 0)
