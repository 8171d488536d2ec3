"""Mutant of reading/hopper_tile_scheduler: answers 'd' to q1 (the answer is 'b').

StaticPersistentTileScheduler::get_next_work adds what to tile_idx? (a) 1 (b) gridDim.x (c) the number of SMs times 2 (d) an atomicAdd result
"""

ANSWERS = {
    # q1: StaticPersistentTileScheduler::get_next_work adds what to tile_idx? (a) 1 (b)
    #     gridDim.x (c) the number of SMs times 2 (d) an atomicAdd result
    "q1": 'd',
    # q2: DynamicPersistentTileScheduler: which scheduling policy does its comment name? (a)
    #     round robin (b) longest-processing-time-first (c) shortest-first (d) random
    "q2": 'b',
    # q3: DynamicPersistentTileScheduler::Params: how many MiB of L2 does it budget for K and
    #     V?
    "q3": 32,
}
