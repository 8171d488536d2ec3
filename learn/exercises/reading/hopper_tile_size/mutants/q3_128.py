"""Mutant of reading/hopper_tile_size: answers 128 to q3 (the answer is 64).

tile_size_fwd_sm8x for an A100 (sm86_or_89 false), 16-bit, head dim 128, not local, no varlen split: kBlockN?
"""

ANSWERS = {
    # q1: tile_size_fwd_sm90, 16-bit, head dim 128 (headdim_v 128), not causal, not local, TMA
    #     KV: kBlockN?
    "q1": 176,
    # q2: Same, but causal: kBlockN?
    "q2": 128,
    # q3: tile_size_fwd_sm8x for an A100 (sm86_or_89 false), 16-bit, head dim 128, not local,
    #     no varlen split: kBlockN?
    "q3": 128,
}
