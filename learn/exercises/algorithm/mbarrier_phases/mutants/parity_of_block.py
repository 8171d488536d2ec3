"""Mutant: the parity from the block's own index (j mod 2) instead of its round through the stage."""


def try_wait_parity(completed, parity):
    return completed % 2 != parity


def stage_and_parity(j, stages):
    return j % stages, j % 2


def wait_is_right(completed, k):
    return try_wait_parity(completed, k % 2) == (completed > k)
