"""Exercise reading/fwd_launch_template — read upstream FlashAttention's csrc/flash_attn/src/flash_fwd_launch_template.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/flash_fwd_launch_template.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Replace each None with your answer: an int for a number, a short string for a name, one letter for
a multiple choice. Case, surrounding whitespace and quotes do not matter; numbers must be exact.
A wrong answer fails; the exercise stays todo while any answer is None.
"""

ANSWERS = {
    # q1: run_mha_fwd_hdim128 on an A100 (sm80, so is_sm8x is false) without dropout: kBlockM?
    "q1": None,
    # q2: Same case: kBlockN?
    "q2": None,
    # q3: run_mha_fwd_hdim128 with dropout: kBlockN?
    "q3": None,
    # q4: run_flash_fwd: grid is dim3(num_m_block, X, Y). Which index does blockIdx.z carry?
    #     (a) the batch (b) the head (c) the key block (d) the split
    "q4": None,
    # q5: run_flash_splitkv_fwd: which kBlockM does the combine kernel use for head dim 128?
    "q5": None,
    # q6: run_flash_fwd raises the kernel's dynamic shared-memory limit (cudaFuncSetAttribute)
    #     when smem_size >= N bytes. N?
    "q6": None,
}
