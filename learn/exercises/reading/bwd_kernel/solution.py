"""Exercise reading/bwd_kernel — read upstream FlashAttention's csrc/flash_attn/src/flash_bwd_kernel.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/flash_bwd_kernel.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Reference answers, each with the place in the file that gives it. Read them after you pass.
"""

ANSWERS = {
    # q1: compute_dq_dk_dv_1colblock loops over which index? (a) n_block (b) m_block (c) bidh
    #     (d) the split
    # where: l. 457: `for (; m_block >= m_block_min; --m_block) {`
    "q1": 'b',
    # q2: Seq_parallel: which CUDA function accumulates dQ into dq_accum?
    # where: l. 678: `atomicAdd(&tdQgdQaccum(i), acc_dq(i));`
    "q2": 'atomicAdd',
    # q3: pointwise_mult (no dropout) computes dS = p * (dp - X). X is (a) the LSE (b) dP_sum
    #     = D (c) the row max (d) softmax_scale
    # where: l. 584-591: `return p * (!Is_dropout || p >= 0 ? dp - d : d);` called with
    #     `dP_sum(mi)`
    "q3": 'b',
    # q4: compute_dq_dk_dv_seqk_parallel: which blockIdx component gives the head? (x, y or z)
    # where: l. 832: `const int bidh = blockIdx.z;`
    "q4": 'z',
}
