"""Spec of algorithm/mbarrier_phases: the parity wait, the stage and parity of a block, when a
parity wait tells the truth."""

from grading import Fail, equal

CONCEPT = "mbarrier phases: a parity wait answers for the current phase only, so a waiter may be one phase off at most"
NEEDS_GPU = False


def check(mod, rng):
    for completed in range(0, 9):
        for parity in (0, 1):
            equal("try_wait_parity", bool(mod.try_wait_parity(completed, parity)), completed % 2 != parity,
                  what=f"completed {completed}, parity {parity}")
    big = int(rng.integers(10, 1000))
    equal("try_wait_parity", bool(mod.try_wait_parity(big, big % 2)), False, what=f"completed {big}: its own parity")

    for stages in (1, 2, 3, 4):
        seen = {}
        for j in range(4 * stages + 3):
            got = tuple(int(x) for x in mod.stage_and_parity(j, stages))
            equal("stage_and_parity", got, (j % stages, (j // stages) % 2), what=f"block {j}, {stages} stages")
            seen.setdefault(got[0], []).append(got[1])
        for stage, parities in seen.items():  # a stage's blocks alternate parity, starting at 0
            if parities[0] != 0 or any(a == b for a, b in zip(parities, parities[1:])):
                raise Fail("stage_and_parity", f"stage {stage} of {stages}: parities {parities} do not alternate from 0")

    for k in range(0, 7):
        for completed in range(0, k + 5):
            want = (completed % 2 != k % 2) == (completed > k)
            equal("wait_is_right", bool(mod.wait_is_right(completed, k)), want,
                  what=f"phase {k}, {completed} completed")
        if mod.wait_is_right(k - 1, k) if k >= 1 else False:
            raise Fail("wait_is_right", f"phase {k} while phase {k - 1} runs: the parity wait says done too early")
    # The consumers' case: one phase off at most, always right.
    k = int(rng.integers(2, 50))
    for completed in (k, k + 1):
        equal("wait_is_right", bool(mod.wait_is_right(completed, k)), True, what=f"phase {k}, {completed} completed")
