"""Spec of reading/bwd_preprocess: questions on upstream FlashAttention's csrc/flash_attn/src/flash_bwd_preprocess_kernel.h.

Only fingerprints of the answers are stored here (learn/exercises/quiz.py explains them); the
answers, with the line of the file that gives each one, are in solution.py.
"""

from quiz import check_answers

CONCEPT = "read csrc/flash_attn/src/flash_bwd_preprocess_kernel.h: compute_dot_do_o: D = rowsum(dO * O), and clearing dQaccum"
NEEDS_GPU = False
UPSTREAM = "Dao-AILab/flash-attention@0251105a2fb1:csrc/flash_attn/src/flash_bwd_preprocess_kernel.h"

EXPECTED = {
    "q1": "decb1517df2dbd71",
    "q2": "e2bb950bd3425bb8",
    "q3": "0baa47318d6c7b16",
}


def check(mod, rng):
    check_answers("reading/bwd_preprocess", mod, EXPECTED)
