"""Exercise algorithm/persistent_waves — hand tiles to persistent CTAs so a causal mask stays balanced.

A persistent kernel launches G CTAs (one per SM) that each run several tiles in turn
(docs/learn/05-hopper.md, section 8b). Tiles are numbered t = 0 .. T-1 with the query block fastest
and each head's LAST query block first: with M query blocks per head, tile t is query block
m = M - 1 - (t mod M). Tiles that run together then share their head's K and V (in L2). Under a
causal mask with seqlen_q = seqlen_k and square blocks, query block m visits m + 1 key blocks: its
cost.

The CTAs take tiles in waves: wave k is tiles [k*G, (k+1)*G), at most one per CTA (the last wave
may be partial). The plain rule "CTA c takes k*G + c" breaks when G is a multiple of M (132 SMs,
M = 4 at seqlen 512): CTA c then gets the same query block in EVERY wave, and the CTAs holding
m = M - 1 set the kernel's time at M/((M+1)/2) times the average.

1. assign(T, G) -> a list of G lists, CTA c's tiles in the order it runs them:
     * every tile 0..T-1 exactly once;
     * the k-th tile of a CTA lies in wave k (so every CTA's list is ascending, and only the last
       wave may leave a CTA without a tile);
     * balanced: no CTA's query block is the same in every wave when G is a multiple of M.
   flashlab's rule (src/cuda/common/tile_scheduler.h, PersistentFwdTileScheduler) rotates each wave:
   CTA c takes tile k*G + (c + k) mod G.
2. makespan(T, G, M) -> the largest total cost of one CTA's tiles under assign(T, G).
"""


def assign(num_tiles, ctas):
    """Returns G lists of tile indices (CTA c's k-th entry from wave k)."""
    raise NotImplementedError


def makespan(num_tiles, ctas, m_blocks):
    """Returns max over CTAs of sum(m + 1) over its tiles, m = m_blocks - 1 - t % m_blocks."""
    raise NotImplementedError
