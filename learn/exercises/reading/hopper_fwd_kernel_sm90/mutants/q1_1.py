"""Mutant of reading/hopper_fwd_kernel_sm90: answers 1 to q1 (the answer is 0).

Which warp_group_idx is the producer (the loads)?
"""

ANSWERS = {
    # q1: Which warp_group_idx is the producer (the loads)?
    "q1": 1,
    # q2: NumMmaWarpGroups = 2 with TMA for K/V: LoadRegisterRequirement?
    "q2": 24,
    # q3: Same: MmaRegisterRequirement?
    "q3": 240,
    # q4: How many load (producer) warp groups does the kernel have?
    "q4": 1,
}
