"""Mutant of reading/hopper_tile_scheduler: answers 'a' to q2 (the answer is 'b').

DynamicPersistentTileScheduler: which scheduling policy does its comment name? (a) round robin (b) longest-processing-time-first (c) shortest-first (d) random
"""

ANSWERS = {
    # q1: StaticPersistentTileScheduler::get_next_work adds what to tile_idx? (a) 1 (b)
    #     gridDim.x (c) the number of SMs times 2 (d) an atomicAdd result
    "q1": 'b',
    # q2: DynamicPersistentTileScheduler: which scheduling policy does its comment name? (a)
    #     round robin (b) longest-processing-time-first (c) shortest-first (d) random
    "q2": 'a',
    # q3: DynamicPersistentTileScheduler::Params: how many MiB of L2 does it budget for K and
    #     V?
    "q3": 32,
}
