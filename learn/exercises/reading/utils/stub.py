"""Exercise reading/utils — read upstream FlashAttention's csrc/flash_attn/src/utils.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/utils.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Replace each None with your answer: an int for a number, a short string for a name, one letter for
a multiple choice. Case, surrounding whitespace and quotes do not matter; numbers must be exact.
A wrong answer fails; the exercise stays todo while any answer is None.
"""

ANSWERS = {
    # q1: Allreduce<4>::run: the first __shfl_xor_sync offset?
    "q1": None,
    # q2: Which helper computes acc += A·B with A already in registers and B read from shared
    #     memory (used for O += P·V)?
    "q2": None,
    # q3: Which function re-views the (MMA=4, MMA_M, MMA_N) accumulator as (nrow, ncol) for
    #     the softmax?
    "q3": None,
}
