"""Exercise reading/softmax — read upstream FlashAttention's csrc/flash_attn/src/softmax.h.

Upstream: github.com/Dao-AILab/flash-attention, file csrc/flash_attn/src/softmax.h
(the answers were checked against commit 0251105a2fb1; line numbers refer to it).
The guide, docs/learn/reading-flash-attention.md, says what the file does, what to look for, and
where flashlab does the same thing.

Reference answers, each with the place in the file that gives it. Read them after you pass.
"""

ANSWERS = {
    # q1: How many threads share one row of S (the Allreduce width)?
    # where: l. 43, 108, 122: `Allreduce<4>::run(...)`
    "q1": 4,
    # q2: scale_apply_exp2 evaluates the exponential in which base?
    # where: l. 88: `exp2f(tensor(mi, ni) * scale - max_scaled)`
    "q2": 2,
    # q3: softmax_rescale_o leaves row_sum thread-local; which member function reduces it
    #     across the threads?
    # where: l. 163-164 (comment) and l. 172: `quad_allreduce_(row_sum, row_sum, sum_op);`
    "q3": 'normalize_softmax_lse',
    # q4: normalize_softmax_lse with Split = true: LSE of a row whose sum is 0? (a) -inf (b) 0
    #     (c) +inf (d) NaN
    # where: l. 180: `(sum == 0.f || sum != sum) ? (Split ? -INFINITY : INFINITY) : ...`
    "q4": 'a',
}
