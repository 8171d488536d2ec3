"""Exercise algorithm/varlen_boundary — packed sequences: what a tile loads past its sequence.

With cu_seqlens the batch's sequences lie one after another in one tensor of `total` rows:
sequence b is rows [cu[b], cu[b + 1]). A kernel loads whole tiles of `block` rows; a TMA copy
fills zeros only past the end of the TENSOR, not past the end of a sequence, so a sequence's last
tile also holds the first rows of the next one (docs/learn/05-hopper-backward.md, section 4f).

1. tile_rows(cu, total, b, j, block) -> (first, loaded, valid): tile j of sequence b starts at
   packed row `first`; `loaded` of its `block` rows come from the tensor (the rest are the copy's
   zeros past row `total`); `valid` of them belong to sequence b (0 when the tile starts past it).
2. pv_tile(p, v, valid) -> p @ v as a kernel computes it for such a tile: p is (rows, block) with
   its columns >= valid already 0 (the mask), v is (block, d) as loaded, and its rows >= valid
   hold the NEXT sequence's values, which may be NaN or Inf. The mask alone is not enough,
   because 0 * NaN = NaN. Return the product over the sequence's own rows, computed the kernel's
   way: zero v's rows >= valid, then multiply the whole tile. Do not modify the caller's v.
3. tiles_to_zero(lens, block_m) -> the (b, m) tiles of dq_accum that exist: sequence b has tiles
   m = 0 .. ceil(lens[b] / block_m) - 1. A layout that pads every sequence to the longest has more;
   only these are ever added to or read, so only these need zeroing. Sorted by (b, m).
"""


def tile_rows(cu, total, b, j, block):
    """(first, loaded, valid) of tile j of sequence b."""
    raise NotImplementedError


def pv_tile(p, v, valid):
    """p @ v over the tile's first `valid` rows of v, the kernel's way (v's other rows zeroed)."""
    raise NotImplementedError


def tiles_to_zero(lens, block_m):
    """[(b, m), ...] for every tile sequence b has."""
    raise NotImplementedError
