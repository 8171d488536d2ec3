"""Exercise reading/bwd_preprocess — read upstream FlashAttention's csrc/flash_attn/src/flash_bwd_preprocess_kernel.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/flash_bwd_preprocess_kernel.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Replace each None with your answer: an int for a number, a short string for a name, one letter for
a multiple choice. Case, surrounding whitespace and quotes do not matter; numbers must be exact.
A wrong answer fails; the exercise stays todo while any answer is None.
"""

ANSWERS = {
    # q1: compute_dot_do_o passes which scale to dot_do_o? (a) 1 (b) softmax_scale (c)
    #     params.p_dropout, the keep probability (d) 1 / keep probability
    "q1": None,
    # q2: With Clear_dQaccum = true, which buffer does compute_dot_do_o zero? (a) dQaccum (b)
    #     dK (c) softmax_lse (d) dP_sum
    "q2": None,
    # q3: dot_do_o: which template parameter gives the width of its row Allreduce (threads per
    #     row)?
    "q3": None,
}
