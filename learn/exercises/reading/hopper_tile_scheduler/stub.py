"""Exercise reading/hopper_tile_scheduler — read upstream FlashAttention's hopper/tile_scheduler.hpp.

Upstream: github.com/Dao-AILab/flash-attention, file hopper/tile_scheduler.hpp
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Replace each None with your answer: an int for a number, a short string for a name, one letter for
a multiple choice. Case, surrounding whitespace and quotes do not matter; numbers must be exact.
A wrong answer fails; the exercise stays todo while any answer is None.
"""

ANSWERS = {
    # q1: StaticPersistentTileScheduler::get_next_work adds what to tile_idx? (a) 1 (b)
    #     gridDim.x (c) the number of SMs times 2 (d) an atomicAdd result
    "q1": None,
    # q2: DynamicPersistentTileScheduler: which scheduling policy does its comment name? (a)
    #     round robin (b) longest-processing-time-first (c) shortest-first (d) random
    "q2": None,
    # q3: DynamicPersistentTileScheduler::Params: how many MiB of L2 does it budget for K and
    #     V?
    "q3": None,
}
