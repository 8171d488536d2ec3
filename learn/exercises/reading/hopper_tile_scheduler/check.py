"""Spec of reading/hopper_tile_scheduler: questions on upstream FlashAttention's hopper/tile_scheduler.hpp.

Only fingerprints of the answers are stored here (learn/exercises/quiz.py explains them); the
answers, with the line of the file that gives each one, are in solution.py.
"""

from quiz import check_answers

CONCEPT = "read hopper/tile_scheduler.hpp: tile schedulers: single tile, static persistent, dynamic persistent with L2 swizzle"
NEEDS_GPU = False
UPSTREAM = "Dao-AILab/flash-attention@0251105a2fb1:hopper/tile_scheduler.hpp"

EXPECTED = {
    "q1": "23779837e8b10d63",
    "q2": "af7d5e6119039ff7",
    "q3": "982fa9526f01063e",
}


def check(mod, rng):
    check_answers("reading/hopper_tile_scheduler", mod, EXPECTED)
