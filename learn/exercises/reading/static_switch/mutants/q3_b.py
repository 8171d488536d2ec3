"""Mutant of reading/static_switch: answers 'b' to q3 (the answer is 'a').

With FLASHATTENTION_DISABLE_UNEVEN_K defined, what value does EVENK_SWITCH give its constant? (a) true (b) false (c) the runtime COND
"""

ANSWERS = {
    # q1: HEADDIM_SWITCH: which kHeadDim does head dim 80 compile as?
    "q1": 96,
    # q2: How many head-dim buckets does HEADDIM_SWITCH have?
    "q2": 6,
    # q3: With FLASHATTENTION_DISABLE_UNEVEN_K defined, what value does EVENK_SWITCH give its
    #     constant? (a) true (b) false (c) the runtime COND
    "q3": 'b',
    # q4: FP16_SWITCH: which elem_type does the false branch use (with its namespace, as
    #     written)?
    "q4": 'cutlass::bfloat16_t',
}
