"""Exercise reading/hopper_fwd_kernel_sm90 — read upstream FlashAttention's hopper/flash_fwd_kernel_sm90.h.

Upstream: github.com/Dao-AILab/flash-attention, file hopper/flash_fwd_kernel_sm90.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Replace each None with your answer: an int for a number, a short string for a name, one letter for
a multiple choice. Case, surrounding whitespace and quotes do not matter; numbers must be exact.
A wrong answer fails; the exercise stays todo while any answer is None.
"""

ANSWERS = {
    # q1: Which warp_group_idx is the producer (the loads)?
    "q1": None,
    # q2: NumMmaWarpGroups = 2 with TMA for K/V: LoadRegisterRequirement?
    "q2": None,
    # q3: Same: MmaRegisterRequirement?
    "q3": None,
    # q4: How many load (producer) warp groups does the kernel have?
    "q4": None,
}
