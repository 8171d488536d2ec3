"""Exercise reading/softmax — read upstream FlashAttention's csrc/flash_attn/src/softmax.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/softmax.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Replace each None with your answer: an int for a number, a short string for a name, one letter for
a multiple choice. Case, surrounding whitespace and quotes do not matter; numbers must be exact.
A wrong answer fails; the exercise stays todo while any answer is None.
"""

ANSWERS = {
    # q1: How many threads share one row of S (the Allreduce width)?
    "q1": None,
    # q2: scale_apply_exp2 evaluates the exponential in which base?
    "q2": None,
    # q3: softmax_rescale_o leaves row_sum thread-local; which member function reduces it
    #     across the threads?
    "q3": None,
    # q4: normalize_softmax_lse with Split = true: LSE of a row whose sum is 0? (a) -inf (b) 0
    #     (c) +inf (d) NaN
    "q4": None,
}
