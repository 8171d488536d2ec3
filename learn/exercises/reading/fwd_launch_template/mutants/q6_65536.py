"""Mutant of reading/fwd_launch_template: answers 65536 to q6 (the answer is 49152).

run_flash_fwd raises the kernel's dynamic shared-memory limit (cudaFuncSetAttribute) when smem_size >= N bytes. N?
"""

ANSWERS = {
    # q1: run_mha_fwd_hdim128 on an A100 (sm80, so is_sm8x is false) without dropout: kBlockM?
    "q1": 128,
    # q2: Same case: kBlockN?
    "q2": 64,
    # q3: run_mha_fwd_hdim128 with dropout: kBlockN?
    "q3": 32,
    # q4: run_flash_fwd: grid is dim3(num_m_block, X, Y). Which index does blockIdx.z carry?
    #     (a) the batch (b) the head (c) the key block (d) the split
    "q4": 'b',
    # q5: run_flash_splitkv_fwd: which kBlockM does the combine kernel use for head dim 128?
    "q5": 4,
    # q6: run_flash_fwd raises the kernel's dynamic shared-memory limit (cudaFuncSetAttribute)
    #     when smem_size >= N bytes. N?
    "q6": 65536,
}
