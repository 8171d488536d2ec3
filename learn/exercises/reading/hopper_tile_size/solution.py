"""Exercise reading/hopper_tile_size — read upstream FlashAttention's hopper/tile_size.h.

Upstream: github.com/Dao-AILab/flash-attention, file hopper/tile_size.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Reference answers, each with the place in the file that gives it. Read them after you pass.
"""

ANSWERS = {
    # q1: tile_size_fwd_sm90, 16-bit, head dim 128 (headdim_v 128), not causal, not local, TMA
    #     KV: kBlockN?
    # where: l. 31-33: `return {128, use_blockN_128 ? 128 : 176, true, true};`
    "q1": 176,
    # q2: Same, but causal: kBlockN?
    # where: l. 32: `use_blockN_128 = is_causal || is_local || paged_kv_non_TMA`
    "q2": 128,
    # q3: tile_size_fwd_sm8x for an A100 (sm86_or_89 false), 16-bit, head dim 128, not local,
    #     no varlen split: kBlockN?
    # where: l. 67-68: `use_8_warps = sm86_or_89 | varlen_and_split` false -> `(is_local ? 48
    #     : 64)`, 4 warps
    "q3": 64,
}
