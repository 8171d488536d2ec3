"""Exercise reading/hopper_named_barrier — read upstream FlashAttention's hopper/named_barrier.hpp.

Upstream: github.com/Dao-AILab/flash-attention, file hopper/named_barrier.hpp
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Replace each None with your answer: an int for a number, a short string for a name, one letter for
a multiple choice. Case, surrounding whitespace and quotes do not matter; numbers must be exact.
A wrong answer fails; the exercise stays todo while any answer is None.
"""

ANSWERS = {
    # q1: Which PTX instruction does named_barrier_sync emit?
    "q1": None,
    # q2: Value of FwdNamedBarriers::WarpSchedulerWG1?
    "q2": None,
    # q3: Which FwdNamedBarriers member has the value 0?
    "q3": None,
}
