"""Mutant of reading/mask: answers 6 to q3 (the answer is 4).

col_idx_offset_ = 0: which column offset does lane 6 start from?
"""

ANSWERS = {
    # q1: apply_mask_causal calls apply_mask_local with which window_size_right?
    "q1": 0,
    # q2: Causal, max_seqlen_q = 8, max_seqlen_k = 16, row_idx = 5: the first masked column
    #     (col_idx_limit_right)?
    "q2": 14,
    # q3: col_idx_offset_ = 0: which column offset does lane 6 start from?
    "q3": 6,
}
