"""Exercise reading/hopper_tile_scheduler — read upstream FlashAttention's hopper/tile_scheduler.hpp.

Upstream: github.com/Dao-AILab/flash-attention, file hopper/tile_scheduler.hpp
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Reference answers, each with the place in the file that gives it. Read them after you pass.
"""

ANSWERS = {
    # q1: StaticPersistentTileScheduler::get_next_work adds what to tile_idx? (a) 1 (b)
    #     gridDim.x (c) the number of SMs times 2 (d) an atomicAdd result
    # where: l. 211: `return {current_work.tile_idx + int(gridDim.x)};`
    "q1": 'b',
    # q2: DynamicPersistentTileScheduler: which scheduling policy does its comment name? (a)
    #     round robin (b) longest-processing-time-first (c) shortest-first (d) random
    # where: l. 223: `We use longest-processing-time-first scheduling`
    "q2": 'b',
    # q3: DynamicPersistentTileScheduler::Params: how many MiB of L2 does it budget for K and
    #     V?
    # where: l. 255: `int const size_l2 = 32 * 1024 * 1024;  // 32 MB for K & V`
    "q3": 32,
}
