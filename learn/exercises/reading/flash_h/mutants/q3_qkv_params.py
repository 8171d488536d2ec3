"""Mutant of reading/flash_h: answers 'Qkv_params' to q3 (the answer is 'Flash_fwd_params').

Which struct does Flash_bwd_params derive from?
"""

ANSWERS = {
    # q1: Which field of Qkv_params precomputes h / h_k (the GQA group size)?
    "q1": 'h_h_k_ratio',
    # q2: Flash_fwd_params::p_dropout holds (a) the probability of dropping (b) the
    #     probability of keeping (c) 1 / (1 - p) (d) p as an 8-bit integer
    "q2": 'b',
    # q3: Which struct does Flash_bwd_params derive from?
    "q3": 'Qkv_params',
    # q4: What C++ type is Qkv_params::index_t (the stride type), as written in the file?
    "q4": 'int64_t',
}
