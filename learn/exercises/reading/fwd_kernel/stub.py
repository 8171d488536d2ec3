"""Exercise reading/fwd_kernel — read upstream FlashAttention's csrc/flash_attn/src/flash_fwd_kernel.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/flash_fwd_kernel.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Replace each None with your answer: an int for a number, a short string for a name, one letter for
a multiple choice. Case, surrounding whitespace and quotes do not matter; numbers must be exact.
A wrong answer fails; the exercise stays todo while any answer is None.
"""

ANSWERS = {
    # q1: In which order does compute_attn_1rowblock visit the key blocks? (a) ascending
    #     n_block (b) descending n_block (c) a scheduler decides
    "q1": None,
    # q2: Causal, seqlen_q = seqlen_k = 1024, kBlockM = 128, kBlockN = 64, m_block = 0:
    #     n_block_max?
    "q2": None,
    # q3: n_masking_steps for Is_causal, Is_even_MN, kBlockM = 128, kBlockN = 64?
    "q3": None,
    # q4: When n_block_max <= n_block_min (no key visible), what LSE does the early exit
    #     write? (a) -inf (b) 0 (c) +inf (d) NaN
    "q4": None,
    # q5: The output tile sO reuses the shared memory of which tile? (a) sQ (b) sK (c) sV (d)
    #     none, it has its own
    "q5": None,
}
