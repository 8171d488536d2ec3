"""Spec of reading/bwd_kernel: questions on upstream FlashAttention's csrc/flash_attn/src/flash_bwd_kernel.h.

Only fingerprints of the answers are stored here (learn/exercises/quiz.py explains them); the
answers, with the line of the file that gives each one, are in solution.py.
"""

from quiz import check_answers

CONCEPT = "read csrc/flash_attn/src/flash_bwd_kernel.h: compute_dq_dk_dv_1colblock: one key block, the query blocks that see it, dS, atomic dQ"
NEEDS_GPU = False
UPSTREAM = "Dao-AILab/flash-attention@0251105a2fb1:csrc/flash_attn/src/flash_bwd_kernel.h"

EXPECTED = {
    "q1": "9dc18855b9b8c2ec",
    "q2": "ab5683148b65afdd",
    "q3": "f627a35d703b71a5",
    "q4": "818a7c60e095498d",
}


def check(mod, rng):
    check_answers("reading/bwd_kernel", mod, EXPECTED)
