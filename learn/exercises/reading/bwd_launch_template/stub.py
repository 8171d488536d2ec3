"""Exercise reading/bwd_launch_template — read upstream FlashAttention's csrc/flash_attn/src/flash_bwd_launch_template.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/flash_bwd_launch_template.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Replace each None with your answer: an int for a number, a short string for a name, one letter for
a multiple choice. Case, surrounding whitespace and quotes do not matter; numbers must be exact.
A wrong answer fails; the exercise stays todo while any answer is None.
"""

ANSWERS = {
    # q1: run_mha_bwd_hdim128 on an A100 (max_smem_per_block >= 144 KB): kBlockM?
    "q1": None,
    # q2: Same case: kBlockN?
    "q2": None,
    # q3: Same case: number of warps?
    "q3": None,
    # q4: How many kernels does run_flash_bwd_seqk_parallel launch?
    "q4": None,
    # q5: Not deterministic: grid_n.x equals (a) the number of query blocks (b) the number of
    #     key blocks (c) the number of SMs (d) batch * heads
    "q5": None,
}
