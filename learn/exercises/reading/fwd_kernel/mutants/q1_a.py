"""Mutant of reading/fwd_kernel: answers 'a' to q1 (the answer is 'b').

In which order does compute_attn_1rowblock visit the key blocks? (a) ascending n_block (b) descending n_block (c) a scheduler decides
"""

ANSWERS = {
    # q1: In which order does compute_attn_1rowblock visit the key blocks? (a) ascending
    #     n_block (b) descending n_block (c) a scheduler decides
    "q1": 'a',
    # q2: Causal, seqlen_q = seqlen_k = 1024, kBlockM = 128, kBlockN = 64, m_block = 0:
    #     n_block_max?
    "q2": 2,
    # q3: n_masking_steps for Is_causal, Is_even_MN, kBlockM = 128, kBlockN = 64?
    "q3": 2,
    # q4: When n_block_max <= n_block_min (no key visible), what LSE does the early exit
    #     write? (a) -inf (b) 0 (c) +inf (d) NaN
    "q4": 'c',
    # q5: The output tile sO reuses the shared memory of which tile? (a) sQ (b) sK (c) sV (d)
    #     none, it has its own
    "q5": 'a',
}
