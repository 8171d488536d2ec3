"""Mutant of reading/interface: answers 'a' to q1 (the answer is 'b').

FlashAttnFunc.forward: with softmax_scale=None and head dim 64, what scale is used? (a) 1/64 (b) 0.125 (c) 8 (d) 1
"""

ANSWERS = {
    # q1: FlashAttnFunc.forward: with softmax_scale=None and head dim 64, what scale is used?
    #     (a) 1/64 (b) 0.125 (c) 8 (d) 1
    "q1": 'a',
    # q2: FlashAttnFunc.forward pads a head dim that is not a multiple of 8. To what size is
    #     head dim 100 padded?
    "q2": 104,
    # q3: Name the compiled extension module that the CUDA build imports as flash_attn_gpu.
    "q3": 'flash_attn_2_cuda',
}
