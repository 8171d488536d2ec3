"""Mutant of reading/bwd_kernel: answers 'atomicExch' to q2 (the answer is 'atomicAdd').

Seq_parallel: which CUDA function accumulates dQ into dq_accum?
"""

ANSWERS = {
    # q1: compute_dq_dk_dv_1colblock loops over which index? (a) n_block (b) m_block (c) bidh
    #     (d) the split
    "q1": 'b',
    # q2: Seq_parallel: which CUDA function accumulates dQ into dq_accum?
    "q2": 'atomicExch',
    # q3: pointwise_mult (no dropout) computes dS = p * (dp - X). X is (a) the LSE (b) dP_sum
    #     = D (c) the row max (d) softmax_scale
    "q3": 'b',
    # q4: compute_dq_dk_dv_seqk_parallel: which blockIdx component gives the head? (x, y or z)
    "q4": 'z',
}
