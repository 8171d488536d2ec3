"""Spec of reading/fwd_kernel: questions on upstream FlashAttention's csrc/flash_attn/src/flash_fwd_kernel.h.

Only fingerprints of the answers are stored here (learn/exercises/quiz.py explains them); the
answers, with the line of the file that gives each one, are in solution.py.
"""

from quiz import check_answers

CONCEPT = "read csrc/flash_attn/src/flash_fwd_kernel.h: compute_attn_1rowblock: block range, masking steps, the main loop, the epilogue"
NEEDS_GPU = False
UPSTREAM = "Dao-AILab/flash-attention@0251105a2fb1:csrc/flash_attn/src/flash_fwd_kernel.h"

EXPECTED = {
    "q1": "1a67a036b90dd696",
    "q2": "413ddc13eb4fc4e7",
    "q3": "39138763cffeb76b",
    "q4": "b17d75c827689bfd",
    "q5": "72ff93c1a0b4474c",
}


def check(mod, rng):
    check_answers("reading/fwd_kernel", mod, EXPECTED)
