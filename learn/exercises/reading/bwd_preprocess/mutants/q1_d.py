"""Mutant of reading/bwd_preprocess: answers 'd' to q1 (the answer is 'c').

compute_dot_do_o passes which scale to dot_do_o? (a) 1 (b) softmax_scale (c) params.p_dropout, the keep probability (d) 1 / keep probability
"""

ANSWERS = {
    # q1: compute_dot_do_o passes which scale to dot_do_o? (a) 1 (b) softmax_scale (c)
    #     params.p_dropout, the keep probability (d) 1 / keep probability
    "q1": 'd',
    # q2: With Clear_dQaccum = true, which buffer does compute_dot_do_o zero? (a) dQaccum (b)
    #     dK (c) softmax_lse (d) dP_sum
    "q2": 'a',
    # q3: dot_do_o: which template parameter gives the width of its row Allreduce (threads per
    #     row)?
    "q3": 'THREADS_PER_ROW',
}
