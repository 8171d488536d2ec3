"""Exercise reading/hopper_mainloop — read upstream FlashAttention's hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp.

Upstream: github.com/Dao-AILab/flash-attention, file hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Reference answers, each with the place in the file that gives it. Read them after you pass.
"""

ANSWERS = {
    # q1: NumProducerThreads when V is not transposed and both Q and K/V use TMA?
    # where: l. 121: `!Transpose_V && Use_TMA_KV && Use_TMA_Q ? cutlass::NumThreadsPerWarp :
    #     cutlass::NumThreadsPerWarpGroup`
    "q1": 32,
    # q2: warp_scheduler_barrier_sync: how many threads take part in the named barrier?
    # where: l. 917: `NamedBarrier::sync(2 * cutlass::NumThreadsPerWarpGroup, ...)`
    "q2": 256,
    # q3: In fwd_step(n_block), the P·V product (gemm1) belongs to which iteration? (a)
    #     n_block (b) n_block + 1 (c) n_block - 1
    # where: l. 1169: `// Each step does gemm0 for iter n_block, gemm1 for iter n_block + 1,
    #     and softmax for iter n_block.`
    "q3": 'b',
    # q4: Use_TMA_KV is false exactly when which template flag is true?
    # where: l. 57: `static constexpr bool Use_TMA_KV = !PagedKVNonTMA;`
    "q4": 'PagedKVNonTMA',
}
