"""Exercise reading/interface — read upstream FlashAttention's flash_attn/flash_attn_interface.py.

Upstream: github.com/Dao-AILab/flash-attention, file flash_attn/flash_attn_interface.py
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Reference answers, each with the place in the file that gives it. Read them after you pass.
"""

ANSWERS = {
    # q1: FlashAttnFunc.forward: with softmax_scale=None and head dim 64, what scale is used?
    #     (a) 1/64 (b) 0.125 (c) 8 (d) 1
    # where: FlashAttnFunc.forward (l. 849): `softmax_scale = q.shape[-1] ** (-0.5)` -> 64 **
    #     -0.5 = 0.125
    "q1": 'b',
    # q2: FlashAttnFunc.forward pads a head dim that is not a multiple of 8. To what size is
    #     head dim 100 padded?
    # where: FlashAttnFunc.forward (l. 851-854): `torch.nn.functional.pad(q, [0, 8 -
    #     head_size_og % 8])`: 100 + 4 = 104
    "q2": 104,
    # q3: Name the compiled extension module that the CUDA build imports as flash_attn_gpu.
    # where: l. 23: `import flash_attn_2_cuda as flash_attn_gpu`
    "q3": 'flash_attn_2_cuda',
}
