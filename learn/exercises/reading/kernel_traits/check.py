"""Spec of reading/kernel_traits: questions on upstream FlashAttention's csrc/flash_attn/src/kernel_traits.h.

Only fingerprints of the answers are stored here (learn/exercises/quiz.py explains them); the
answers, with the line of the file that gives each one, are in solution.py.
"""

from quiz import check_answers

CONCEPT = "read csrc/flash_attn/src/kernel_traits.h: Flash_fwd_kernel_traits: MMA atom, swizzled smem layouts, gmem copies, smem size"
NEEDS_GPU = False
UPSTREAM = "Dao-AILab/flash-attention@0251105a2fb1:csrc/flash_attn/src/kernel_traits.h"

EXPECTED = {
    "q1": "b5cbb70fe827b201",
    "q2": "ac9f4c2e7acd90f0",
    "q3": "95b089a9417d1cc4",
    "q4": "3ff445168aa952a6",
    "q5": "e81c359a82ae28fc",
}


def check(mod, rng):
    check_answers("reading/kernel_traits", mod, EXPECTED)
