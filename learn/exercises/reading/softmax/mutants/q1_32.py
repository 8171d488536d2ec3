"""Mutant of reading/softmax: answers 32 to q1 (the answer is 4).

How many threads share one row of S (the Allreduce width)?
"""

ANSWERS = {
    # q1: How many threads share one row of S (the Allreduce width)?
    "q1": 32,
    # q2: scale_apply_exp2 evaluates the exponential in which base?
    "q2": 2,
    # q3: softmax_rescale_o leaves row_sum thread-local; which member function reduces it
    #     across the threads?
    "q3": 'normalize_softmax_lse',
    # q4: normalize_softmax_lse with Split = true: LSE of a row whose sum is 0? (a) -inf (b) 0
    #     (c) +inf (d) NaN
    "q4": 'a',
}
