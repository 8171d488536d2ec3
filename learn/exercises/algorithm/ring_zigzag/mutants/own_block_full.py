"""Mutant: the own block computed without the causal mask."""


def zigzag_chunks(rank, world):
    return rank, 2 * world - 1 - rank


def ring_plan(step, rank, world, causal):
    if not causal:
        return "all", "all", False
    if step == 0:
        return "all", "all", False
    src = (rank - step) % world
    if src < rank:
        return "all", "first", False
    return "second", "all", False
