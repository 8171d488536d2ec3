"""Mutant of reading/hopper_named_barrier: answers 'bar.arrive' to q1 (the answer is 'bar.sync').

Which PTX instruction does named_barrier_sync emit?
"""

ANSWERS = {
    # q1: Which PTX instruction does named_barrier_sync emit?
    "q1": 'bar.arrive',
    # q2: Value of FwdNamedBarriers::WarpSchedulerWG1?
    "q2": 1,
    # q3: Which FwdNamedBarriers member has the value 0?
    "q3": 'QueryEmpty',
}
