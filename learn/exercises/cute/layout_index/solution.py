"""Solution for cute/layout_index (the task is in stub.py)."""


def crd2idx(coord, shape, stride):
    if isinstance(shape, tuple):
        if isinstance(coord, int):  # split colexicographically: leftmost mode fastest
            out = 0
            for s, d in zip(shape, stride):
                n = size(s)
                out += crd2idx(coord % n, s, d)
                coord //= n
            return out
        return sum(crd2idx(c, s, d) for c, s, d in zip(coord, shape, stride))
    return coord * stride


def size(shape):
    return size_tuple(shape) if isinstance(shape, tuple) else shape


def size_tuple(shape):
    n = 1
    for s in shape:
        n *= size(s)
    return n


def col_major(shape):
    out, p = [], 1
    for s in shape:
        out.append(p)
        p *= s
    return tuple(out)


def row_major(shape):
    return tuple(reversed(col_major(tuple(reversed(shape)))))
