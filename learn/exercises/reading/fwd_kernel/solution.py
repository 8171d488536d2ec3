"""Exercise reading/fwd_kernel — read upstream FlashAttention's csrc/flash_attn/src/flash_fwd_kernel.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/flash_fwd_kernel.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Reference answers, each with the place in the file that gives it. Read them after you pass.
"""

ANSWERS = {
    # q1: In which order does compute_attn_1rowblock visit the key blocks? (a) ascending
    #     n_block (b) descending n_block (c) a scheduler decides
    # where: l. 274: `int n_block = n_block_max - 1;` then `--n_block` (l. 309, 385)
    "q1": 'b',
    # q2: Causal, seqlen_q = seqlen_k = 1024, kBlockM = 128, kBlockN = 64, m_block = 0:
    #     n_block_max?
    # where: l. 93-94: `cute::ceil_div((m_block + 1) * kBlockM + binfo.actual_seqlen_k -
    #     binfo.actual_seqlen_q + params.window_size_right, kBlockN)` = ceil_div(128, 64)
    "q2": 2,
    # q3: n_masking_steps for Is_causal, Is_even_MN, kBlockM = 128, kBlockN = 64?
    # where: l. 305-307: `(Is_even_MN && Is_causal) ? cute::ceil_div(kBlockM, kBlockN) : ... +
    #     1`
    "q3": 2,
    # q4: When n_block_max <= n_block_min (no key visible), what LSE does the early exit
    #     write? (a) -inf (b) 0 (c) +inf (d) NaN
    # where: l. 132: `gLSE(row) = INFINITY;`
    "q4": 'c',
    # q5: The output tile sO reuses the shared memory of which tile? (a) sQ (b) sK (c) sV (d)
    #     none, it has its own
    # where: l. 444: `Tensor sO = make_tensor(sQ.data(), typename
    #     Kernel_traits::SmemLayoutO{});`
    "q5": 'a',
}
