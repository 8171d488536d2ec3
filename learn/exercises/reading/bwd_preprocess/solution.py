"""Exercise reading/bwd_preprocess — read upstream FlashAttention's csrc/flash_attn/src/flash_bwd_preprocess_kernel.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/flash_bwd_preprocess_kernel.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Reference answers, each with the place in the file that gives it. Read them after you pass.
"""

ANSWERS = {
    # q1: compute_dot_do_o passes which scale to dot_do_o? (a) 1 (b) softmax_scale (c)
    #     params.p_dropout, the keep probability (d) 1 / keep probability
    # where: l. 131-132: `dot_do_o<Kernel_traits::kGmemThreadsPerRow>(tdOrdO, tdOrO, dP_sum,`
    #     ... `params.p_dropout);` (comment l. 128-130)
    "q1": 'c',
    # q2: With Clear_dQaccum = true, which buffer does compute_dot_do_o zero? (a) dQaccum (b)
    #     dK (c) softmax_lse (d) dP_sum
    # where: l. 133-138: `if (Clear_dQaccum) {` ... `cute::copy(gmem_tiled_copy_dQaccum, zero,
    #     tdQgdQaccum);`
    "q2": 'a',
    # q3: dot_do_o: which template parameter gives the width of its row Allreduce (threads per
    #     row)?
    # where: l. 24, 46: `template <int THREADS_PER_ROW, ...>` and
    #     `Allreduce<THREADS_PER_ROW>::run(dP_sum_cur, sum_op) * scale`
    "q3": 'THREADS_PER_ROW',
}
