"""Mutant: contiguous-shard thinking: blocks from later ranks skipped (their keys "come after")."""


def zigzag_chunks(rank, world):
    return rank, 2 * world - 1 - rank


def ring_plan(step, rank, world, causal):
    if not causal:
        return "all", "all", False
    if step == 0:
        return "all", "all", True
    src = (rank - step) % world
    if src < rank:
        return "all", "first", False
    return None
