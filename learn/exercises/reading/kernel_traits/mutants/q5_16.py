"""Mutant of reading/kernel_traits: answers 16 to q5 (the answer is 8).

kGmemThreadsPerRow for head dim 128 and a 16-bit element?
"""

ANSWERS = {
    # q1: Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, bf16>: kSmemSize in bytes?
    "q1": 65536,
    # q2: kBlockKSmem for head dim 96?
    "q2": 32,
    # q3: kSwizzle for head dim 96?
    "q3": 2,
    # q4: The sm80 MMA atom is 16x8xK: what is K?
    "q4": 16,
    # q5: kGmemThreadsPerRow for head dim 128 and a 16-bit element?
    "q5": 16,
}
