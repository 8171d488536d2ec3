"""Solution for cute/coalesce (the task is in stub.py)."""


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
    return (rs[0], rd[0]) if len(rs) == 1 else (tuple(rs), tuple(rd))
