"""Spec of reading/block_info: questions on upstream FlashAttention's csrc/flash_attn/src/block_info.h.

Only fingerprints of the answers are stored here (learn/exercises/quiz.py explains them); the
answers, with the line of the file that gives each one, are in solution.py.
"""

from quiz import check_answers

CONCEPT = "read csrc/flash_attn/src/block_info.h: BlockInfo: a sequence's lengths and offsets, padded or varlen"
NEEDS_GPU = False
UPSTREAM = "Dao-AILab/flash-attention@0251105a2fb1:csrc/flash_attn/src/block_info.h"

EXPECTED = {
    "q1": "14c057b4f9d357e4",
    "q2": "8d63c4f846db6124",
    "q3": "8d826ecabbc8c5f2",
}


def check(mod, rng):
    check_answers("reading/block_info", mod, EXPECTED)
