"""Exercise reading/flash_api — read upstream FlashAttention's csrc/flash_attn/flash_api.cpp.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/flash_api.cpp
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Replace each None with your answer: an int for a number, a short string for a name, one letter for
a multiple choice. Case, surrounding whitespace and quotes do not matter; numbers must be exact.
A wrong answer fails; the exercise stays todo while any answer is None.
"""

ANSWERS = {
    # q1: mha_fwd: what is the largest head_size the forward accepts?
    "q1": None,
    # q2: mha_fwd: head_size_rounded for head_size 160?
    "q2": None,
    # q3: mha_fwd: seqlen_q_rounded is seqlen_q rounded up to a multiple of what?
    "q3": None,
    # q4: mha_fwd turns is_causal off when seqlen_q equals what (and there is no ALiBi)?
    "q4": None,
    # q5: num_splits_heuristic returns the smallest split count whose efficiency reaches what
    #     fraction of the best? (a) 0.8 (b) 0.85 (c) 0.9 (d) 1.0
    "q5": None,
    # q6: set_params_splitkv calls num_splits_heuristic with num_sm multiplied by what?
    "q6": None,
    # q7: Under which Python name does PYBIND11_MODULE expose mha_varlen_fwd?
    "q7": None,
}
