"""Exercise reading/utils — read upstream FlashAttention's csrc/flash_attn/src/utils.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/utils.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Reference answers, each with the place in the file that gives it. Read them after you pass.
"""

ANSWERS = {
    # q1: Allreduce<4>::run: the first __shfl_xor_sync offset?
    # where: l. 116-117: `constexpr int OFFSET = THREADS / 2; x = op(x,
    #     __shfl_xor_sync(uint32_t(-1), x, OFFSET));`
    "q1": 2,
    # q2: Which helper computes acc += A·B with A already in registers and B read from shared
    #     memory (used for O += P·V)?
    # where: l. 166: `gemm_rs(Tensor0 &acc, Tensor1 &tCrA, Tensor2 &tCrB, Tensor3 const&
    #     tCsB,`; flash_fwd_kernel.h l. 374: `FLASH_NAMESPACE::gemm_rs(acc_o, tOrP, tOrVt,
    #     tOsVt,`
    "q2": 'gemm_rs',
    # q3: Which function re-views the (MMA=4, MMA_M, MMA_N) accumulator as (nrow, ncol) for
    #     the softmax?
    # where: l. 186-188: `// Convert acc_layout from (MMA=4, MMA_M, MMA_N) to (nrow=(2,
    #     MMA_M), ncol=(2, MMA_N))`
    "q3": 'convert_layout_acc_rowcol',
}
