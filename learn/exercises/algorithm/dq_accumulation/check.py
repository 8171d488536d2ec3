"""Spec of algorithm/dq_accumulation: bits of the fp32 sums, and the rounding bound against float64."""

import numpy as np
from grading import Fail, close, equal

CONCEPT = "dQ accumulation: atomics (arrival order) vs deterministic order; fp32 addition is not associative"
NEEDS_GPU = False


def fp32_sum(partials, order):
    acc = np.zeros(partials[0].shape, dtype=np.float32)
    for j in order:
        acc = acc + partials[j]
    return acc


def check(mod, rng):
    for nq, d, T in ((4, 3, 5), (8, 16, 9), (1, 2, 3)):
        # terms of very different sizes and signs: the order changes the rounding
        partials = [(rng.standard_normal((nq, d)) * 10.0 ** rng.uniform(-3, 4)).astype(np.float32)
                    for _ in range(T)]
        for p in partials:
            p[p == 0] = 0.5
        # one element where the order surely matters: (B - B) + 1 = 1 but (B + 1) - B = 0 in fp32
        idx = tuple(int(rng.integers(n)) for n in (nq, d))
        big = np.float32(2.0**25 * 10.0 ** rng.integers(0, 3))
        partials[0][idx], partials[1][idx], partials[2][idx] = big, -big, np.float32(1.0)
        exact = np.sum([p.astype(np.float64) for p in partials], axis=0)
        bound = T * 2.0**-24 * np.sum([np.abs(p.astype(np.float64)) for p in partials], axis=0)
        ascending = fp32_sum(partials, range(T))
        orders = []
        for _ in range(200):  # arrival orders whose sum differs in the bits from key-block order
            o = [int(x) for x in rng.permutation(T)]
            if not np.array_equal(fp32_sum(partials, o), ascending):
                orders.append(o)
            if len(orders) == 2:
                break
        if len(orders) < 2:
            raise RuntimeError("check: no order with different bits found (increase the spread)")
        name = f"Nq {nq} d {d}, {T} key blocks"
        for o in orders:
            got = mod.dq_atomic([p.copy() for p in partials], list(o))
            if np.asarray(got).dtype != np.float32:
                raise Fail(f"{name}: dq_atomic dtype", f"got {np.asarray(got).dtype}, expected float32 "
                                                       "(the workspace is fp32)")
            close(f"{name}: dq_atomic within fp32 rounding of the exact sum", got, exact, rtol=0,
                  atol=float(bound.max()), what="dQ")
            equal(f"{name}: dq_atomic bits of the arrival order {o}", np.asarray(got).view(np.uint32),
                  fp32_sum(partials, o).view(np.uint32), what="dQ bits (as uint32)")
            got = mod.dq_deterministic([p.copy() for p in partials], list(o))
            equal(f"{name}: dq_deterministic independent of arrival order {o}",
                  np.asarray(got, dtype=np.float32).view(np.uint32), ascending.view(np.uint32),
                  what="dQ bits (as uint32)")
