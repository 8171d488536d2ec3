"""Mutant of reading/utils: answers 'gemm' to q2 (the answer is 'gemm_rs').

Which helper computes acc += A·B with A already in registers and B read from shared memory (used for O += P·V)?
"""

ANSWERS = {
    # q1: Allreduce<4>::run: the first __shfl_xor_sync offset?
    "q1": 2,
    # q2: Which helper computes acc += A·B with A already in registers and B read from shared
    #     memory (used for O += P·V)?
    "q2": 'gemm',
    # q3: Which function re-views the (MMA=4, MMA_M, MMA_N) accumulator as (nrow, ncol) for
    #     the softmax?
    "q3": 'convert_layout_acc_rowcol',
}
