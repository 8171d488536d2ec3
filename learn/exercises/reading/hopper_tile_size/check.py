"""Spec of reading/hopper_tile_size: questions on upstream FlashAttention's hopper/tile_size.h.

Only fingerprints of the answers are stored here (learn/exercises/quiz.py explains them); the
answers, with the line of the file that gives each one, are in solution.py.
"""

from quiz import check_answers

CONCEPT = "read hopper/tile_size.h: tile_size_fwd_sm90 / tile_size_fwd_sm8x: FA3's tile choices"
NEEDS_GPU = False
UPSTREAM = "Dao-AILab/flash-attention@0251105a2fb1:hopper/tile_size.h"

EXPECTED = {
    "q1": "0b29594dcb68897a",
    "q2": "65a87182568ca909",
    "q3": "8a6e654b8b42a8f6",
}


def check(mod, rng):
    check_answers("reading/hopper_tile_size", mod, EXPECTED)
