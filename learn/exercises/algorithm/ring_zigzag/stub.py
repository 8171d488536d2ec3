"""Exercise algorithm/ring_zigzag — causal ring attention: who holds which chunks, and what each step computes.

Ring attention (docs/distributed.md) splits a sequence over R ranks. At step s = 0 ... R-1 rank r
holds the K/V block of rank (r - s) mod R (its own at step 0) and computes its queries against it;
partial results merge exactly through their LSE (algorithm/split_kv_combine).

With causal attention and contiguous shards, rank 0 has one block to compute and rank R-1 has R.
Zigzag sharding balances them: cut the sequence into 2R equal chunks, and give rank r chunks r and
2R-1-r (an early one and a late one), stored in that order. A shard then has two halves: "first"
(its early chunk) and "second" (its late chunk). For a query chunk a and a key chunk b of the same
length: b < a is fully visible, b == a is causal, b > a is skipped.

1. zigzag_chunks(rank, world) -> (a, b): the two chunk indices of the rank's shard, a < b.
2. ring_plan(step, rank, world, causal) -> (q_part, k_part, is_causal): ONE attention call per step,
   where q_part / k_part are "all", "first" or "second" (rows of this rank's queries / of the
   visiting block's keys) and is_causal asks for a causal mask aligned bottom-right on those rows
   (with equal lengths: local query i sees local keys j <= i). Return None to skip the step.

Non-causal: every step is ("all", "all", False). Causal: work out the own block (step 0), a block
from an earlier rank and a block from a later rank from the chunk rules above. The checker counts,
over every rank and step, which (query, key) pairs of the whole sequence your plan computes: each
causally visible pair exactly once, no other pair; and with causal every rank must do the same
work (visible pairs).
"""


def zigzag_chunks(rank, world):
    """Returns (a, b), ints: the chunks of rank's shard in a sequence cut into 2*world chunks."""
    raise NotImplementedError


def ring_plan(step, rank, world, causal):
    """Returns (q_part, k_part, is_causal) or None; parts "all", "first", "second"."""
    raise NotImplementedError
