"""Exercise reading/hopper_fwd_kernel_sm90 — read upstream FlashAttention's hopper/flash_fwd_kernel_sm90.h.

Upstream: github.com/Dao-AILab/flash-attention, file hopper/flash_fwd_kernel_sm90.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Reference answers, each with the place in the file that gives it. Read them after you pass.
"""

ANSWERS = {
    # q1: Which warp_group_idx is the producer (the loads)?
    # where: l. 308: `if (warp_group_idx == 0) {  // Producer`
    "q1": 0,
    # q2: NumMmaWarpGroups = 2 with TMA for K/V: LoadRegisterRequirement?
    # where: l. 82: `NumMmaWarpGroups == 2 ? (Use_TMA_KV ? 24 : 40)`
    "q2": 24,
    # q3: Same: MmaRegisterRequirement?
    # where: l. 83: `NumMmaWarpGroups == 2 ? (Use_TMA_KV ? 240 : 232)`
    "q3": 240,
    # q4: How many load (producer) warp groups does the kernel have?
    # where: l. 74: `static constexpr uint32_t NumLoadWarpGroups = 1;`
    "q4": 1,
}
