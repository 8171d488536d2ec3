"""Mutant: right when behind (completed <= k + 1), as if waiting early could only block longer."""


def try_wait_parity(completed, parity):
    return completed % 2 != parity


def stage_and_parity(j, stages):
    return j % stages, (j // stages) % 2


def wait_is_right(completed, k):
    return completed <= k + 1
