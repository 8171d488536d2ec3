"""Exercise reading/bwd_kernel — read upstream FlashAttention's csrc/flash_attn/src/flash_bwd_kernel.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/flash_bwd_kernel.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Replace each None with your answer: an int for a number, a short string for a name, one letter for
a multiple choice. Case, surrounding whitespace and quotes do not matter; numbers must be exact.
A wrong answer fails; the exercise stays todo while any answer is None.
"""

ANSWERS = {
    # q1: compute_dq_dk_dv_1colblock loops over which index? (a) n_block (b) m_block (c) bidh
    #     (d) the split
    "q1": None,
    # q2: Seq_parallel: which CUDA function accumulates dQ into dq_accum?
    "q2": None,
    # q3: pointwise_mult (no dropout) computes dS = p * (dp - X). X is (a) the LSE (b) dP_sum
    #     = D (c) the row max (d) softmax_scale
    "q3": None,
    # q4: compute_dq_dk_dv_seqk_parallel: which blockIdx component gives the head? (x, y or z)
    "q4": None,
}
