"""Exercise reading/flash_api — read upstream FlashAttention's csrc/flash_attn/flash_api.cpp.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/flash_api.cpp
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Reference answers, each with the place in the file that gives it. Read them after you pass.
"""

ANSWERS = {
    # q1: mha_fwd: what is the largest head_size the forward accepts?
    # where: l. 416: `TORCH_CHECK(head_size <= 256, ...)`
    "q1": 256,
    # q2: mha_fwd: head_size_rounded for head_size 160?
    # where: l. 458: `round_multiple(head_size, head_size <= 128 ? 32 : 64)` ->
    #     round_multiple(160, 64) = 192
    "q2": 192,
    # q3: mha_fwd: seqlen_q_rounded is seqlen_q rounded up to a multiple of what?
    # where: l. 459: `round_multiple(seqlen_q, 128)`
    "q3": 128,
    # q4: mha_fwd turns is_causal off when seqlen_q equals what (and there is no ALiBi)?
    # where: l. 426: `if (seqlen_q == 1 && !alibi_slopes_.has_value()) { is_causal = false; }`
    "q4": 1,
    # q5: num_splits_heuristic returns the smallest split count whose efficiency reaches what
    #     fraction of the best? (a) 0.8 (b) 0.85 (c) 0.9 (d) 1.0
    # where: l. 309: `if (efficiency[num_splits - 1] >= 0.85 * max_efficiency)`
    "q5": 'b',
    # q6: set_params_splitkv calls num_splits_heuristic with num_sm multiplied by what?
    # where: l. 335: `num_splits_heuristic(batch_size * num_heads * num_m_blocks, num_sm * 2,
    #     num_n_blocks, 128)`
    "q6": 2,
    # q7: Under which Python name does PYBIND11_MODULE expose mha_varlen_fwd?
    # where: l. 1538: `m.def("varlen_fwd", &FLASH_NAMESPACE::mha_varlen_fwd, ...)`
    "q7": 'varlen_fwd',
}
