"""Spec of reading/interface: questions on upstream FlashAttention's flash_attn/flash_attn_interface.py.

Only fingerprints of the answers are stored here (learn/exercises/quiz.py explains them); the
answers, with the line of the file that gives each one, are in solution.py.
"""

from quiz import check_answers

CONCEPT = "read flash_attn/flash_attn_interface.py: upstream's Python entry: flash_attn_func -> FlashAttnFunc -> the compiled fwd"
NEEDS_GPU = False
UPSTREAM = "Dao-AILab/flash-attention@0251105a2fb1:flash_attn/flash_attn_interface.py"

EXPECTED = {
    "q1": "3fe5705d389005d6",
    "q2": "cc624a0bbb665ad1",
    "q3": "9574816bf91adec1",
}


def check(mod, rng):
    check_answers("reading/interface", mod, EXPECTED)
