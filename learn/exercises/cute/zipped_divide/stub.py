"""Exercise cute/zipped_divide — ((tile), (rest)): the form local_tile and partitioning use.

zipped_divide(A, (tm, tn)) is logical_divide's result with the modes regrouped: all the in-tile
modes first, all the tile-index modes second: ((tm, tn), (M / tm, N / tn)). Mode 0 is one tile
(what one CTA owns: local_tile(gQ, (kBlockM, kHeadDim), (m_block, _)) picks one value of mode 1),
mode 1 says which tile.

Write zipped_divide(a, tm, tn) -> int array T of shape (tm, tn, M // tm, N // tn): T[i, j, bi, bj]
is the offset of element (i, j) of tile (bi, bj). a = ((M, N), (row stride, col stride)). No pycute.
"""

import numpy as np  # noqa: F401


def zipped_divide(a, tm, tn):
    raise NotImplementedError
