"""Mutant: a parity wait trusted at any distance (the helper warp's bug)."""


def try_wait_parity(completed, parity):
    return completed % 2 != parity


def stage_and_parity(j, stages):
    return j % stages, (j // stages) % 2


def wait_is_right(completed, k):
    return True
