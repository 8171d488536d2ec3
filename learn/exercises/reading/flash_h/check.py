"""Spec of reading/flash_h: questions on upstream FlashAttention's csrc/flash_attn/src/flash.h.

Only fingerprints of the answers are stored here (learn/exercises/quiz.py explains them); the
answers, with the line of the file that gives each one, are in solution.py.
"""

from quiz import check_answers

CONCEPT = "read csrc/flash_attn/src/flash.h: the params structs: Qkv_params -> Flash_fwd_params -> Flash_bwd_params"
NEEDS_GPU = False
UPSTREAM = "Dao-AILab/flash-attention@0251105a2fb1:csrc/flash_attn/src/flash.h"

EXPECTED = {
    "q1": "b34cfaa6cb9031d3",
    "q2": "01b155f0eff7cd16",
    "q3": "5173f8b8ae42402e",
    "q4": "a60b5d648aa1ca14",
}


def check(mod, rng):
    check_answers("reading/flash_h", mod, EXPECTED)
