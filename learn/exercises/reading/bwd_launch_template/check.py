"""Spec of reading/bwd_launch_template: questions on upstream FlashAttention's csrc/flash_attn/src/flash_bwd_launch_template.h.

Only fingerprints of the answers are stored here (learn/exercises/quiz.py explains them); the
answers, with the line of the file that gives each one, are in solution.py.
"""

from quiz import check_answers

CONCEPT = "read csrc/flash_attn/src/flash_bwd_launch_template.h: run_flash_bwd_seqk_parallel: three launches, the grids, the backward tile sizes"
NEEDS_GPU = False
UPSTREAM = "Dao-AILab/flash-attention@0251105a2fb1:csrc/flash_attn/src/flash_bwd_launch_template.h"

EXPECTED = {
    "q1": "8ea233ab6b9200f4",
    "q2": "c5eeaec5425fcde3",
    "q3": "b89c54a8777deab9",
    "q4": "38e15bfe4ab6dfb1",
    "q5": "136b6d66bb962dc9",
}


def check(mod, rng):
    check_answers("reading/bwd_launch_template", mod, EXPECTED)
