"""Exercise reading/mask — read upstream FlashAttention's csrc/flash_attn/src/mask.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/mask.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Replace each None with your answer: an int for a number, a short string for a name, one letter for
a multiple choice. Case, surrounding whitespace and quotes do not matter; numbers must be exact.
A wrong answer fails; the exercise stays todo while any answer is None.
"""

ANSWERS = {
    # q1: apply_mask_causal calls apply_mask_local with which window_size_right?
    "q1": None,
    # q2: Causal, max_seqlen_q = 8, max_seqlen_k = 16, row_idx = 5: the first masked column
    #     (col_idx_limit_right)?
    "q2": None,
    # q3: col_idx_offset_ = 0: which column offset does lane 6 start from?
    "q3": None,
}
