"""Mutant: a block from a later rank handled like one from an earlier rank (all queries vs its first half)."""


def zigzag_chunks(rank, world):
    return rank, 2 * world - 1 - rank


def ring_plan(step, rank, world, causal):
    if not causal:
        return "all", "all", False
    if step == 0:
        return "all", "all", True
    return "all", "first", False
