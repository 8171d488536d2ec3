"""Exercise reading/fwd_launch_template — read upstream FlashAttention's csrc/flash_attn/src/flash_fwd_launch_template.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/flash_fwd_launch_template.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Reference answers, each with the place in the file that gives it. Read them after you pass.
"""

ANSWERS = {
    # q1: run_mha_fwd_hdim128 on an A100 (sm80, so is_sm8x is false) without dropout: kBlockM?
    # where: l. 262: `Flash_fwd_kernel_traits<Headdim, 128, 64, 4, false, false, T>` (is_sm8x
    #     = cc_major == 8 && cc_minor > 0, l. 250)
    "q1": 128,
    # q2: Same case: kBlockN?
    # where: l. 262: `Flash_fwd_kernel_traits<Headdim, 128, 64, 4, ...>`
    "q2": 64,
    # q3: run_mha_fwd_hdim128 with dropout: kBlockN?
    # where: l. 273: `Flash_fwd_kernel_traits<Headdim, 128, 32, 4, false, false, T>`
    "q3": 32,
    # q4: run_flash_fwd: grid is dim3(num_m_block, X, Y). Which index does blockIdx.z carry?
    #     (a) the batch (b) the head (c) the key block (d) the split
    # where: l. 64: `dim3 grid(num_m_block, params.b, params.h);` (and flash_fwd_kernel.h l.
    #     1088 `bidh = blockIdx.z`)
    "q4": 'b',
    # q5: run_flash_splitkv_fwd: which kBlockM does the combine kernel use for head dim 128?
    # where: l. 140: `Kernel_traits::kHeadDim % 128 == 0 ? 4 : (Kernel_traits::kHeadDim % 64
    #     == 0 ? 8 : 16)`
    "q5": 4,
    # q6: run_flash_fwd raises the kernel's dynamic shared-memory limit (cudaFuncSetAttribute)
    #     when smem_size >= N bytes. N?
    # where: l. 83: `if (smem_size >= 48 * 1024)`
    "q6": 49152,
}
