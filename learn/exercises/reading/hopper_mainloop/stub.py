"""Exercise reading/hopper_mainloop — read upstream FlashAttention's hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp.

Upstream: github.com/Dao-AILab/flash-attention, file hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Replace each None with your answer: an int for a number, a short string for a name, one letter for
a multiple choice. Case, surrounding whitespace and quotes do not matter; numbers must be exact.
A wrong answer fails; the exercise stays todo while any answer is None.
"""

ANSWERS = {
    # q1: NumProducerThreads when V is not transposed and both Q and K/V use TMA?
    "q1": None,
    # q2: warp_scheduler_barrier_sync: how many threads take part in the named barrier?
    "q2": None,
    # q3: In fwd_step(n_block), the P·V product (gemm1) belongs to which iteration? (a)
    #     n_block (b) n_block + 1 (c) n_block - 1
    "q3": None,
    # q4: Use_TMA_KV is false exactly when which template flag is true?
    "q4": None,
}
