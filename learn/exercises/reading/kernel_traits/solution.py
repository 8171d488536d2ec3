"""Exercise reading/kernel_traits — read upstream FlashAttention's csrc/flash_attn/src/kernel_traits.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/kernel_traits.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Reference answers, each with the place in the file that gives it. Read them after you pass.
"""

ANSWERS = {
    # q1: Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, bf16>: kSmemSize in bytes?
    # where: l. 107-109: Q 128*128*2 = 32768 + K,V 64*128*2*2 = 32768 (`kSmemKVSize =
    #     size(SmemLayoutKV{}) * 2 * sizeof(Element)`)
    "q1": 65536,
    # q2: kBlockKSmem for head dim 96?
    # where: l. 70: `kHeadDim % 64 == 0 ? 64 : 32`
    "q2": 32,
    # q3: kSwizzle for head dim 96?
    # where: l. 72: `kBlockKSmem == 32 ? 2 : 3`
    "q3": 2,
    # q4: The sm80 MMA atom is 16x8xK: what is K?
    # where: l. 32-33: `SM80_16x8x16_F32F16F16F32_TN` / `SM80_16x8x16_F32BF16BF16F32_TN`
    "q4": 16,
    # q5: kGmemThreadsPerRow for head dim 128 and a 16-bit element?
    # where: l. 111, 118: kGmemElemsPerLoad = 16 / 2 = 8; `kBlockKSmem / kGmemElemsPerLoad` =
    #     64 / 8
    "q5": 8,
}
