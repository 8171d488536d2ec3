"""Exercise algorithm/block_skipping — which key blocks a query block visits, and which need a mask.

Query block b covers rows [b*Br, min((b+1)*Br, Nq)); key block j covers keys [j*Bc, min((j+1)*Bc, Nk)).
Mask: bottom-right causal (if causal) and a left window (window_left, -1 = unbounded), so row i sees
keys [lo_i, hi_i] (algorithm/window_interval with right = 0 if causal else -1). Both lo_i and hi_i
are nondecreasing in i, so for the query block with first row i0 and last row i1 (docs/algorithm.md,
section 6, "Why intervals pay off"):

  * visit  = the key blocks that meet [lo_i0, hi_i1]: every other block is SKIPPED (never loaded);
             rows that see no key at all contribute nothing (a block whose rows are all empty visits
             nothing);
  * masked = the visited blocks that need the per-element mask: those not wholly inside
             [lo_i1, hi_i0], the keys that EVERY row of the block sees. Keys >= Nk (the tail of the
             last key block) do not count as masked; only (row, key) pairs inside the problem do.
"""


def key_blocks(q_block, block_q, block_k, seqlen_q, seqlen_k, causal, window_left):
    """Returns (visit, masked): two ascending lists of key-block indices, masked a subset of visit."""
    raise NotImplementedError
