"""Mutant of reading/hopper_mainloop: answers 'PackGQA' to q4 (the answer is 'PagedKVNonTMA').

Use_TMA_KV is false exactly when which template flag is true?
"""

ANSWERS = {
    # q1: NumProducerThreads when V is not transposed and both Q and K/V use TMA?
    "q1": 32,
    # q2: warp_scheduler_barrier_sync: how many threads take part in the named barrier?
    "q2": 256,
    # q3: In fwd_step(n_block), the P·V product (gemm1) belongs to which iteration? (a)
    #     n_block (b) n_block + 1 (c) n_block - 1
    "q3": 'b',
    # q4: Use_TMA_KV is false exactly when which template flag is true?
    "q4": 'PackGQA',
}
