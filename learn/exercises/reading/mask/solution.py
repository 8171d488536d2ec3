"""Exercise reading/mask — read upstream FlashAttention's csrc/flash_attn/src/mask.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/mask.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Reference answers, each with the place in the file that gives it. Read them after you pass.
"""

ANSWERS = {
    # q1: apply_mask_causal calls apply_mask_local with which window_size_right?
    # where: l. 80-81: `apply_mask_local</*HasWSLeft=*/false>(tensor, ...` with arguments
    #     ending `max_seqlen_q, warp_row_stride, -1, 0);`
    "q1": 0,
    # q2: Causal, max_seqlen_q = 8, max_seqlen_k = 16, row_idx = 5: the first masked column
    #     (col_idx_limit_right)?
    # where: l. 173: `std::min(max_seqlen_k, row_idx + 1 + max_seqlen_k - max_seqlen_q +
    #     window_size_right)` = min(16, 5 + 1 + 8 + 0)
    "q2": 14,
    # q3: col_idx_offset_ = 0: which column offset does lane 6 start from?
    # where: l. 145: `col_idx_offset_ + (lane_id % 4) * 2` = (6 % 4) * 2
    "q3": 4,
}
