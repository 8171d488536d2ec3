"""Mutant of reading/hopper_named_barrier: answers 'PEmpty' to q3 (the answer is 'QueryEmpty').

Which FwdNamedBarriers member has the value 0?
"""

ANSWERS = {
    # q1: Which PTX instruction does named_barrier_sync emit?
    "q1": 'bar.sync',
    # q2: Value of FwdNamedBarriers::WarpSchedulerWG1?
    "q2": 1,
    # q3: Which FwdNamedBarriers member has the value 0?
    "q3": 'PEmpty',
}
