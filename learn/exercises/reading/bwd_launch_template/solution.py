"""Exercise reading/bwd_launch_template — read upstream FlashAttention's csrc/flash_attn/src/flash_bwd_launch_template.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/flash_bwd_launch_template.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Reference answers, each with the place in the file that gives it. Read them after you pass.
"""

ANSWERS = {
    # q1: run_mha_bwd_hdim128 on an A100 (max_smem_per_block >= 144 KB): kBlockM?
    # where: l. 247-248: `Flash_bwd_kernel_traits<Headdim, 64, 128, 8, 2, 4, 2, false, false,
    #     T>`
    "q1": 64,
    # q2: Same case: kBlockN?
    # where: l. 248: `Flash_bwd_kernel_traits<Headdim, 64, 128, ...>`
    "q2": 128,
    # q3: Same case: number of warps?
    # where: l. 248: `..., 64, 128, 8, ...` (kNWarps)
    "q3": 8,
    # q4: How many kernels does run_flash_bwd_seqk_parallel launch?
    # where: l. 85/87 flash_bwd_dot_do_o_kernel, l. 111
    #     flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel, l. 124 flash_bwd_convert_dq_kernel
    "q4": 3,
    # q5: Not deterministic: grid_n.x equals (a) the number of query blocks (b) the number of
    #     key blocks (c) the number of SMs (d) batch * heads
    # where: l. 76-77, 82: `int gridDimx = num_n_block;` `dim3 grid_n(gridDimx, params.b,
    #     params.h);`
    "q5": 'b',
}
