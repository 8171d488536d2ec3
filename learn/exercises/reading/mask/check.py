"""Spec of reading/mask: questions on upstream FlashAttention's csrc/flash_attn/src/mask.h.

Only fingerprints of the answers are stored here (learn/exercises/quiz.py explains them); the
answers, with the line of the file that gives each one, are in solution.py.
"""

from quiz import check_answers

CONCEPT = "read csrc/flash_attn/src/mask.h: Mask::apply_mask: column limits per row, causal as a local window"
NEEDS_GPU = False
UPSTREAM = "Dao-AILab/flash-attention@0251105a2fb1:csrc/flash_attn/src/mask.h"

EXPECTED = {
    "q1": "c702c10db9a5bf0d",
    "q2": "a0006c8c421c427b",
    "q3": "82c255fff384b29d",
}


def check(mod, rng):
    check_answers("reading/mask", mod, EXPECTED)
