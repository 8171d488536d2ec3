"""Mutant: "done" when the current phase has the SAME parity."""


def try_wait_parity(completed, parity):
    return completed % 2 == parity


def stage_and_parity(j, stages):
    return j % stages, (j // stages) % 2


def wait_is_right(completed, k):
    return try_wait_parity(completed, k % 2) == (completed > k)
