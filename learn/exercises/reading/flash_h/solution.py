"""Exercise reading/flash_h — read upstream FlashAttention's csrc/flash_attn/src/flash.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/flash.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Reference answers, each with the place in the file that gives it. Read them after you pass.
"""

ANSWERS = {
    # q1: Which field of Qkv_params precomputes h / h_k (the GQA group size)?
    # where: l. 42: `int h_h_k_ratio; // precompute h / h_k,`
    "q1": 'h_h_k_ratio',
    # q2: Flash_fwd_params::p_dropout holds (a) the probability of dropping (b) the
    #     probability of keeping (c) 1 / (1 - p) (d) p as an 8-bit integer
    # where: l. 106: `// The dropout probability (probability of keeping an activation).`;
    #     flash_api.cpp l. 142: `params.p_dropout = 1.f - p_dropout;`
    "q2": 'b',
    # q3: Which struct does Flash_bwd_params derive from?
    # where: l. 151: `struct Flash_bwd_params : public Flash_fwd_params {`
    "q3": 'Flash_fwd_params',
    # q4: What C++ type is Qkv_params::index_t (the stride type), as written in the file?
    # where: l. 21: `using index_t = int64_t;`
    "q4": 'int64_t',
}
