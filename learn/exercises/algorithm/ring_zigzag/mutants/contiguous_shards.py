"""Mutant: contiguous shards (chunks 2r and 2r+1) with the plan that fits them: every visible pair
once, but rank R-1 computes R blocks' worth of pairs and rank 0 one (the imbalance zigzag removes)."""


def zigzag_chunks(rank, world):
    return 2 * rank, 2 * rank + 1


def ring_plan(step, rank, world, causal):
    if not causal:
        return "all", "all", False
    if step == 0:
        return "all", "all", True
    src = (rank - step) % world
    if src < rank:  # an earlier rank's keys: all before ours
        return "all", "all", False
    return None  # a later rank's keys: all after ours
