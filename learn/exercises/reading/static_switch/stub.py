"""Exercise reading/static_switch — read upstream FlashAttention's csrc/flash_attn/src/static_switch.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/static_switch.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Replace each None with your answer: an int for a number, a short string for a name, one letter for
a multiple choice. Case, surrounding whitespace and quotes do not matter; numbers must be exact.
A wrong answer fails; the exercise stays todo while any answer is None.
"""

ANSWERS = {
    # q1: HEADDIM_SWITCH: which kHeadDim does head dim 80 compile as?
    "q1": None,
    # q2: How many head-dim buckets does HEADDIM_SWITCH have?
    "q2": None,
    # q3: With FLASHATTENTION_DISABLE_UNEVEN_K defined, what value does EVENK_SWITCH give its
    #     constant? (a) true (b) false (c) the runtime COND
    "q3": None,
    # q4: FP16_SWITCH: which elem_type does the false branch use (with its namespace, as
    #     written)?
    "q4": None,
}
