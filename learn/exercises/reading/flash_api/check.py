"""Spec of reading/flash_api: questions on upstream FlashAttention's csrc/flash_attn/flash_api.cpp.

Only fingerprints of the answers are stored here (learn/exercises/quiz.py explains them); the
answers, with the line of the file that gives each one, are in solution.py.
"""

from quiz import check_answers

CONCEPT = "read csrc/flash_attn/flash_api.cpp: the C++ entry points: checks, rounding, causal/window normalization, split-KV heuristic"
NEEDS_GPU = False
UPSTREAM = "Dao-AILab/flash-attention@0251105a2fb1:csrc/flash_attn/flash_api.cpp"

EXPECTED = {
    "q1": "83b143a28db6dd2f",
    "q2": "92cf6549b1a1665b",
    "q3": "23a8297ab6c7db51",
    "q4": "e1b9d860cab1ca72",
    "q5": "2b54ed4a4cc5a90a",
    "q6": "07f059dfce8f3366",
    "q7": "d26f51380153e6d1",
}


def check(mod, rng):
    check_answers("reading/flash_api", mod, EXPECTED)
