"""Spec of reading/softmax: questions on upstream FlashAttention's csrc/flash_attn/src/softmax.h.

Only fingerprints of the answers are stored here (learn/exercises/quiz.py explains them); the
answers, with the line of the file that gives each one, are in solution.py.
"""

from quiz import check_answers

CONCEPT = "read csrc/flash_attn/src/softmax.h: Softmax::softmax_rescale_o and normalize_softmax_lse: the online softmax in registers"
NEEDS_GPU = False
UPSTREAM = "Dao-AILab/flash-attention@0251105a2fb1:csrc/flash_attn/src/softmax.h"

EXPECTED = {
    "q1": "06e7096371e2a04e",
    "q2": "fc8a059f5d741e0a",
    "q3": "659cee62eea46908",
    "q4": "94d02ff5f7a98a47",
}


def check(mod, rng):
    check_answers("reading/softmax", mod, EXPECTED)
