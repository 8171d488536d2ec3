"""Mutant of reading/hopper_named_barrier: answers 0 to q2 (the answer is 1).

Value of FwdNamedBarriers::WarpSchedulerWG1?
"""

ANSWERS = {
    # q1: Which PTX instruction does named_barrier_sync emit?
    "q1": 'bar.sync',
    # q2: Value of FwdNamedBarriers::WarpSchedulerWG1?
    "q2": 0,
    # q3: Which FwdNamedBarriers member has the value 0?
    "q3": 'QueryEmpty',
}
