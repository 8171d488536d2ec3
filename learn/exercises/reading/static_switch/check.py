"""Spec of reading/static_switch: questions on upstream FlashAttention's csrc/flash_attn/src/static_switch.h.

Only fingerprints of the answers are stored here (learn/exercises/quiz.py explains them); the
answers, with the line of the file that gives each one, are in solution.py.
"""

from quiz import check_answers

CONCEPT = "read csrc/flash_attn/src/static_switch.h: runtime values -> constexpr template arguments: BOOL_SWITCH and friends"
NEEDS_GPU = False
UPSTREAM = "Dao-AILab/flash-attention@0251105a2fb1:csrc/flash_attn/src/static_switch.h"

EXPECTED = {
    "q1": "b2e624d466a9730d",
    "q2": "3660103253591228",
    "q3": "14121784f91936fe",
    "q4": "f106ace687cdba3b",
}


def check(mod, rng):
    check_answers("reading/static_switch", mod, EXPECTED)
