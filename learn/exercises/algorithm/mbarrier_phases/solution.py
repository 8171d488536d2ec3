"""Solution of algorithm/mbarrier_phases (see stub.py for the task)."""


def try_wait_parity(completed, parity):
    return completed % 2 != parity


def stage_and_parity(j, stages):
    return j % stages, (j // stages) % 2


def wait_is_right(completed, k):
    # Phase k has completed iff completed > k. The parity answer is sure to agree only at
    # completed = k (not done) and k + 1 (done); further off, only when the parity happens to fit:
    # one phase behind it says "done" (phase k - 1, in progress, has the other parity), two ahead
    # it says "not done" (phase k + 2, in progress, has k's parity).
    return try_wait_parity(completed, k % 2) == (completed > k)
