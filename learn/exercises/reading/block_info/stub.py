"""Exercise reading/block_info — read upstream FlashAttention's csrc/flash_attn/src/block_info.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/block_info.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Replace each None with your answer: an int for a number, a short string for a name, one letter for
a multiple choice. Case, surrounding whitespace and quotes do not matter; numbers must be exact.
A wrong answer fails; the exercise stays todo while any answer is None.
"""

ANSWERS = {
    # q1: cu_seqlens_q = [0, 5, 12] (varlen): actual_seqlen_q of bidb = 1?
    "q1": None,
    # q2: In varlen mode (sum_s_q != -1), which argument of q_offset() is ignored?
    "q2": None,
    # q3: is_seqlens_k_cumulative false, cu_seqlens_k = [9, 4], no leftpad, no seqused_k, no
    #     knew: actual_seqlen_k of bidb = 1?
    "q3": None,
}
