"""Mutant of reading/block_info: answers -5 to q3 (the answer is 4).

is_seqlens_k_cumulative false, cu_seqlens_k = [9, 4], no leftpad, no seqused_k, no knew: actual_seqlen_k of bidb = 1?
"""

ANSWERS = {
    # q1: cu_seqlens_q = [0, 5, 12] (varlen): actual_seqlen_q of bidb = 1?
    "q1": 7,
    # q2: In varlen mode (sum_s_q != -1), which argument of q_offset() is ignored?
    "q2": 'batch_stride',
    # q3: is_seqlens_k_cumulative false, cu_seqlens_k = [9, 4], no leftpad, no seqused_k, no
    #     knew: actual_seqlen_k of bidb = 1?
    "q3": -5,
}
