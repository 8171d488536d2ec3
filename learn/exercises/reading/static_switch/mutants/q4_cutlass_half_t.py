"""Mutant of reading/static_switch: answers 'cutlass::half_t' to q4 (the answer is 'cutlass::bfloat16_t').

FP16_SWITCH: which elem_type does the false branch use (with its namespace, as written)?
"""

ANSWERS = {
    # q1: HEADDIM_SWITCH: which kHeadDim does head dim 80 compile as?
    "q1": 96,
    # q2: How many head-dim buckets does HEADDIM_SWITCH have?
    "q2": 6,
    # q3: With FLASHATTENTION_DISABLE_UNEVEN_K defined, what value does EVENK_SWITCH give its
    #     constant? (a) true (b) false (c) the runtime COND
    "q3": 'a',
    # q4: FP16_SWITCH: which elem_type does the false branch use (with its namespace, as
    #     written)?
    "q4": 'cutlass::half_t',
}
