"""Spec of reading/fwd_launch_template: questions on upstream FlashAttention's csrc/flash_attn/src/flash_fwd_launch_template.h.

Only fingerprints of the answers are stored here (learn/exercises/quiz.py explains them); the
answers, with the line of the file that gives each one, are in solution.py.
"""

from quiz import check_answers

CONCEPT = "read csrc/flash_attn/src/flash_fwd_launch_template.h: run_flash_fwd: the grid, the flag switches, and the tile size per head dim"
NEEDS_GPU = False
UPSTREAM = "Dao-AILab/flash-attention@0251105a2fb1:csrc/flash_attn/src/flash_fwd_launch_template.h"

EXPECTED = {
    "q1": "a870c12f54d51009",
    "q2": "d1fde1e1597a9d51",
    "q3": "7dbca76f6594bd71",
    "q4": "04824d0529d8ec1f",
    "q5": "9418dacd1513d7dd",
    "q6": "04000d6fc184adaf",
}


def check(mod, rng):
    check_answers("reading/fwd_launch_template", mod, EXPECTED)
