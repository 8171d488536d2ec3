"""Mutant of reading/bwd_launch_template: answers 64 to q2 (the answer is 128).

Same case: kBlockN?
"""

ANSWERS = {
    # q1: run_mha_bwd_hdim128 on an A100 (max_smem_per_block >= 144 KB): kBlockM?
    "q1": 64,
    # q2: Same case: kBlockN?
    "q2": 64,
    # q3: Same case: number of warps?
    "q3": 8,
    # q4: How many kernels does run_flash_bwd_seqk_parallel launch?
    "q4": 3,
    # q5: Not deterministic: grid_n.x equals (a) the number of query blocks (b) the number of
    #     key blocks (c) the number of SMs (d) batch * heads
    "q5": 'b',
}
