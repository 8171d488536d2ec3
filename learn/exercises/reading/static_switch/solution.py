"""Exercise reading/static_switch — read upstream FlashAttention's csrc/flash_attn/src/static_switch.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/static_switch.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Reference answers, each with the place in the file that gives it. Read them after you pass.
"""

ANSWERS = {
    # q1: HEADDIM_SWITCH: which kHeadDim does head dim 80 compile as?
    # where: l. 98-100: `} else if (HEADDIM <= 96) { constexpr static int kHeadDim = 96;`
    "q1": 96,
    # q2: How many head-dim buckets does HEADDIM_SWITCH have?
    # where: l. 90-111: 32, 64, 96, 128, 192, 256
    "q2": 6,
    # q3: With FLASHATTENTION_DISABLE_UNEVEN_K defined, what value does EVENK_SWITCH give its
    #     constant? (a) true (b) false (c) the runtime COND
    # where: l. 49-54: `constexpr static bool CONST_NAME = true;`
    "q3": 'a',
    # q4: FP16_SWITCH: which elem_type does the false branch use (with its namespace, as
    #     written)?
    # where: l. 85: `using elem_type = cutlass::bfloat16_t;`
    "q4": 'cutlass::bfloat16_t',
}
