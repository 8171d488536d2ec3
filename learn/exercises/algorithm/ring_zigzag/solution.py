"""Solution of algorithm/ring_zigzag (the plan of python/flashlab/distributed.py, _plan)."""


def zigzag_chunks(rank, world):
    return rank, 2 * world - 1 - rank


def ring_plan(step, rank, world, causal):
    if not causal:
        return "all", "all", False
    if step == 0:  # own chunks (r, 2R-1-r): same chunk causal, (2R-1-r, r) full, (r, 2R-1-r) skipped
        return "all", "all", True
    src = (rank - step) % world
    if src < rank:  # its chunk src is before both of ours (full); its chunk 2R-1-src after both (skipped)
        return "all", "first", False
    # src > rank: both its chunks come after our chunk r (skipped), before our chunk 2R-1-r (full)
    return "second", "all", False
