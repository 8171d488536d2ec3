"""Spec of reading/hopper_named_barrier: questions on upstream FlashAttention's hopper/named_barrier.hpp.

Only fingerprints of the answers are stored here (learn/exercises/quiz.py explains them); the
answers, with the line of the file that gives each one, are in solution.py.
"""

from quiz import check_answers

CONCEPT = "read hopper/named_barrier.hpp: named barriers: bar.sync / bar.arrive with ids above CUTLASS's reserved ones"
NEEDS_GPU = False
UPSTREAM = "Dao-AILab/flash-attention@0251105a2fb1:hopper/named_barrier.hpp"

EXPECTED = {
    "q1": "83905673fc6df45f",
    "q2": "fd36b84827e5bdb9",
    "q3": "fa0ad5e4e994f738",
}


def check(mod, rng):
    check_answers("reading/hopper_named_barrier", mod, EXPECTED)
