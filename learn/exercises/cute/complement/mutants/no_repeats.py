"""Mutant: the last mode ceil(M / cur):cur (the repeats up to the cotarget) is forgotten."""


def leaves(t):
    return [x for s in t for x in leaves(s)] if isinstance(t, tuple) else [t]


def complement(shape, stride, cotarget):
    rs, rd, cur = [], [], 1
    for d, s in sorted(zip(leaves(stride), leaves(shape))):
        if d == 0 or s == 1:
            continue
        rs.append(d // cur)
        rd.append(cur)
        cur = s * d
    rs.append(1)
    rd.append(cur)
    return tuple(rs), tuple(rd)
