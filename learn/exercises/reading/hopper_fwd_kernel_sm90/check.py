"""Spec of reading/hopper_fwd_kernel_sm90: questions on upstream FlashAttention's hopper/flash_fwd_kernel_sm90.h.

Only fingerprints of the answers are stored here (learn/exercises/quiz.py explains them); the
answers, with the line of the file that gives each one, are in solution.py.
"""

from quiz import check_answers

CONCEPT = "read hopper/flash_fwd_kernel_sm90.h: FlashAttnFwdSm90: producer and consumer warp groups, register reallocation"
NEEDS_GPU = False
UPSTREAM = "Dao-AILab/flash-attention@0251105a2fb1:hopper/flash_fwd_kernel_sm90.h"

EXPECTED = {
    "q1": "237e94197b1801a4",
    "q2": "8c3c74a68761e962",
    "q3": "a9fa0c92a14c993c",
    "q4": "c4ee3c90d7be076b",
}


def check(mod, rng):
    check_answers("reading/hopper_fwd_kernel_sm90", mod, EXPECTED)
