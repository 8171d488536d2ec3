"""Mutant of reading/flash_api: answers 'mha_varlen_fwd' to q7 (the answer is 'varlen_fwd').

Under which Python name does PYBIND11_MODULE expose mha_varlen_fwd?
"""

ANSWERS = {
    # q1: mha_fwd: what is the largest head_size the forward accepts?
    "q1": 256,
    # q2: mha_fwd: head_size_rounded for head_size 160?
    "q2": 192,
    # q3: mha_fwd: seqlen_q_rounded is seqlen_q rounded up to a multiple of what?
    "q3": 128,
    # q4: mha_fwd turns is_causal off when seqlen_q equals what (and there is no ALiBi)?
    "q4": 1,
    # q5: num_splits_heuristic returns the smallest split count whose efficiency reaches what
    #     fraction of the best? (a) 0.8 (b) 0.85 (c) 0.9 (d) 1.0
    "q5": 'b',
    # q6: set_params_splitkv calls num_splits_heuristic with num_sm multiplied by what?
    "q6": 2,
    # q7: Under which Python name does PYBIND11_MODULE expose mha_varlen_fwd?
    "q7": 'mha_varlen_fwd',
}
