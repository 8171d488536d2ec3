"""Exercise algorithm/mbarrier_phases — what a parity wait on an mbarrier can and cannot tell.

A pipeline stage's "full" mbarrier (docs/learn/05-hopper.md, section 2) completes one phase each
time its tile lands: phase 0 for the first tile through that stage, phase 1 for the next, and so
on. A thread does not wait for "phase k": PTX's `mbarrier.try_wait.parity` takes one bit, and
answers "done" when the barrier's CURRENT phase has the other parity. Here `completed` counts the
phases the barrier has completed, so its current phase is number `completed`.

1. try_wait_parity(completed, parity) -> bool: the answer of a parity wait (True: "done").
2. stage_and_parity(j, stages) -> (stage, parity): block j (0, 1, 2, ...) of a pipeline of
   `stages` stages goes through stage j mod stages; the parity to wait with for it.
3. wait_is_right(completed, k) -> bool: whether a parity wait for phase k (its parity, k mod 2)
   answers the truth, "phase k has completed", when the barrier has completed `completed` phases.
   The consumers of a pipeline are never more than one phase off, so for them it always is; a
   helper warp that starts waiting for a late block while the pipeline is still early is not
   (flashlab's first varlen backward on Hopper zeroed a stage another block was using that way:
   docs/design/sm90-backward.md, section 7).
"""


def try_wait_parity(completed, parity):
    """True when the barrier's current phase (number `completed`) has the other parity."""
    raise NotImplementedError


def stage_and_parity(j, stages):
    """(stage, parity) that block j waits on."""
    raise NotImplementedError


def wait_is_right(completed, k):
    """Whether try_wait_parity(completed, k % 2) == (phase k has completed)."""
    raise NotImplementedError
