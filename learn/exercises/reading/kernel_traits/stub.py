"""Exercise reading/kernel_traits — read upstream FlashAttention's csrc/flash_attn/src/kernel_traits.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/kernel_traits.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Replace each None with your answer: an int for a number, a short string for a name, one letter for
a multiple choice. Case, surrounding whitespace and quotes do not matter; numbers must be exact.
A wrong answer fails; the exercise stays todo while any answer is None.
"""

ANSWERS = {
    # q1: Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, bf16>: kSmemSize in bytes?
    "q1": None,
    # q2: kBlockKSmem for head dim 96?
    "q2": None,
    # q3: kSwizzle for head dim 96?
    "q3": None,
    # q4: The sm80 MMA atom is 16x8xK: what is K?
    "q4": None,
    # q5: kGmemThreadsPerRow for head dim 128 and a 16-bit element?
    "q5": None,
}
