"""Exercise reading/hopper_named_barrier — read upstream FlashAttention's hopper/named_barrier.hpp.

Upstream: github.com/Dao-AILab/flash-attention, file hopper/named_barrier.hpp
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Reference answers, each with the place in the file that gives it. Read them after you pass.
"""

ANSWERS = {
    # q1: Which PTX instruction does named_barrier_sync emit?
    # where: l. 20: `asm volatile("bar.sync %0, %1;" ...)`
    "q1": 'bar.sync',
    # q2: Value of FwdNamedBarriers::WarpSchedulerWG1?
    # where: l. 52: `WarpSchedulerWG1 = 1,`
    "q2": 1,
    # q3: Which FwdNamedBarriers member has the value 0?
    # where: l. 51: `QueryEmpty = 0,`
    "q3": 'QueryEmpty',
}
