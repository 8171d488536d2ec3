"""Exercise reading/hopper_tile_size — read upstream FlashAttention's hopper/tile_size.h.

Upstream: github.com/Dao-AILab/flash-attention, file hopper/tile_size.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Replace each None with your answer: an int for a number, a short string for a name, one letter for
a multiple choice. Case, surrounding whitespace and quotes do not matter; numbers must be exact.
A wrong answer fails; the exercise stays todo while any answer is None.
"""

ANSWERS = {
    # q1: tile_size_fwd_sm90, 16-bit, head dim 128 (headdim_v 128), not causal, not local, TMA
    #     KV: kBlockN?
    "q1": None,
    # q2: Same, but causal: kBlockN?
    "q2": None,
    # q3: tile_size_fwd_sm8x for an A100 (sm86_or_89 false), 16-bit, head dim 128, not local,
    #     no varlen split: kBlockN?
    "q3": None,
}
