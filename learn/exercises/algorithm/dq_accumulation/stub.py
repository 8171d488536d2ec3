"""Exercise algorithm/dq_accumulation — atomics-style vs deterministic accumulation of dQ.

In the FA-2 backward the KEY loop is outside: the CTA of key block j computes a partial
dQ_i^(j) = scale · dS_ij K_j for every query block and ADDS it into a shared fp32 dQ workspace
(docs/algorithm.md, section 5). With atomics the additions land in whatever order the CTAs finish.

Floating-point addition is not associative: (a + b) + c != a + (b + c) in general (try a = 1e8,
b = −1e8, c = 1 in float32 against a = 1e8, c = 1, b = −1e8). So the sum's bits depend on the
order; every order is within fp32 rounding of the exact sum (about T · 2^-24 · sum|terms| for T
terms), but a run is not bit-reproducible. A deterministic mode fixes the order.

Both functions get `partials`, a list of T float32 arrays (Nq, d) — partial j is key block j's
contribution — and `order`, the order in which the blocks ARRIVE (a permutation of range(T)).
Accumulate in a float32 array that starts at zero, one partial at a time (acc = acc + partial,
in float32):

  dq_atomic:        add the partials in ARRIVAL order: partials[order[0]], partials[order[1]], ...
  dq_deterministic: the same bits whatever the arrival order: add in key-block order 0, 1, ..., T−1
                    (a kernel buffers the partials, or has one CTA own dQ_i and loop over j in order).
Return float32 arrays.
"""

import numpy as np


def dq_atomic(partials, order):
    raise NotImplementedError


def dq_deterministic(partials, order):
    raise NotImplementedError
