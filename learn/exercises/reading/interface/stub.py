"""Exercise reading/interface — read upstream FlashAttention's flash_attn/flash_attn_interface.py.

Upstream: github.com/Dao-AILab/flash-attention, file flash_attn/flash_attn_interface.py
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Replace each None with your answer: an int for a number, a short string for a name, one letter for
a multiple choice. Case, surrounding whitespace and quotes do not matter; numbers must be exact.
A wrong answer fails; the exercise stays todo while any answer is None.
"""

ANSWERS = {
    # q1: FlashAttnFunc.forward: with softmax_scale=None and head dim 64, what scale is used?
    #     (a) 1/64 (b) 0.125 (c) 8 (d) 1
    "q1": None,
    # q2: FlashAttnFunc.forward pads a head dim that is not a multiple of 8. To what size is
    #     head dim 100 padded?
    "q2": None,
    # q3: Name the compiled extension module that the CUDA build imports as flash_attn_gpu.
    "q3": None,
}
