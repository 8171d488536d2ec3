"""Exercise algorithm/dynamic_tiles — a tile counter, longest tiles first, heads grouped for L2.

Static waves (algorithm/persistent_waves) give each persistent CTA a fixed set of tiles. Under a
causal mask the tiles differ in cost, and fixed sets leave some CTAs busy while others idle. The
dynamic scheduler of cuda_sm90's forward (docs/learn/05-hopper.md, section 8b) has each CTA take
the NEXT tile from a global counter when it is free. Two things make that balance:

* the ORDER of the tiles: longest first, so that the last tiles handed out, the ones that decide
  when the kernel ends, are the shortest;
* heads in GROUPS: longest first over every head at once would have the tiles running together
  read every head's K and V. So the (head, sequence) pairs go in groups of `group` pairs (the
  pairs whose K and V fit in L2 together); within a group, longest first; the groups one after
  the other. The last group holds what is left (pairs mod group, or group).

With M query blocks per pair, query block m (0..M-1) visits m + 1 key blocks under a causal mask
(seqlen_q = seqlen_k, square blocks): its cost.

1. grouped_order(M, pairs, group) -> the list of (pair, m) in the order the counter hands them out:
   group 0's pairs at m = M-1 (pairs in increasing order), then group 0's pairs at m = M-2, ...,
   down to m = 0; then group 1; ... Every (pair, m) exactly once. group = 1 is the static order
   (each pair's blocks from the last to the first). flashlab: common::grouped_tile_coords in
   src/cuda/common/persistent_waves.h.
2. dynamic_makespan(costs, ctas, overhead) -> when the last CTA finishes if the tiles (their costs
   in hand-out order) go one by one to the CTA that is free first (ties: the lowest CTA index);
   each tile occupies its CTA for cost + overhead. All CTAs start free at time 0.
"""


def grouped_order(m_blocks, pairs, group):
    """Returns the list of (pair, m) tuples in hand-out order."""
    raise NotImplementedError


def dynamic_makespan(costs, ctas, overhead):
    """Returns the time the busiest CTA finishes (a float)."""
    raise NotImplementedError
