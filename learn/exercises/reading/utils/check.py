"""Spec of reading/utils: questions on upstream FlashAttention's csrc/flash_attn/src/utils.h.

Only fingerprints of the answers are stored here (learn/exercises/quiz.py explains them); the
answers, with the line of the file that gives each one, are in solution.py.
"""

from quiz import check_answers

CONCEPT = "read csrc/flash_attn/src/utils.h: the helpers: Allreduce, the accumulator layouts, gemm / gemm_rs, predicated copy"
NEEDS_GPU = False
UPSTREAM = "Dao-AILab/flash-attention@0251105a2fb1:csrc/flash_attn/src/utils.h"

EXPECTED = {
    "q1": "33bc503625daa5cd",
    "q2": "8545719197e8677e",
    "q3": "39f976c6be24be57",
}


def check(mod, rng):
    check_answers("reading/utils", mod, EXPECTED)
