"""Exercise reading/flash_h — read upstream FlashAttention's csrc/flash_attn/src/flash.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/flash.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Replace each None with your answer: an int for a number, a short string for a name, one letter for
a multiple choice. Case, surrounding whitespace and quotes do not matter; numbers must be exact.
A wrong answer fails; the exercise stays todo while any answer is None.
"""

ANSWERS = {
    # q1: Which field of Qkv_params precomputes h / h_k (the GQA group size)?
    "q1": None,
    # q2: Flash_fwd_params::p_dropout holds (a) the probability of dropping (b) the
    #     probability of keeping (c) 1 / (1 - p) (d) p as an 8-bit integer
    "q2": None,
    # q3: Which struct does Flash_bwd_params derive from?
    "q3": None,
    # q4: What C++ type is Qkv_params::index_t (the stride type), as written in the file?
    "q4": None,
}
