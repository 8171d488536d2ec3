"""Exercise reading/block_info — read upstream FlashAttention's csrc/flash_attn/src/block_info.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/block_info.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Reference answers, each with the place in the file that gives it. Read them after you pass.
"""

ANSWERS = {
    # q1: cu_seqlens_q = [0, 5, 12] (varlen): actual_seqlen_q of bidb = 1?
    # where: l. 19: `params.cu_seqlens_q[bidb + 1] - sum_s_q` = 12 - 5
    "q1": 7,
    # q2: In varlen mode (sum_s_q != -1), which argument of q_offset() is ignored?
    # where: l. 30: `sum_s_q == -1 ? bidb * batch_stride : uint32_t(sum_s_q) * row_stride`
    "q2": 'batch_stride',
    # q3: is_seqlens_k_cumulative false, cu_seqlens_k = [9, 4], no leftpad, no seqused_k, no
    #     knew: actual_seqlen_k of bidb = 1?
    # where: l. 23: `: params.cu_seqlens_k[bidb]` when not cumulative
    "q3": 4,
}
