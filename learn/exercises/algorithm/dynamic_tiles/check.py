"""Spec of algorithm/dynamic_tiles: the grouped longest-first order, the counter's makespan."""

from grading import Fail, close, equal

CONCEPT = "a dynamic tile counter: tiles longest first within L2 groups of heads, each to the first free CTA"
NEEDS_GPU = False


def reference_makespan(costs, ctas, overhead):
    free = [0.0] * ctas
    for cost in costs:
        c = min(range(ctas), key=lambda i: (free[i], i))
        free[c] += cost + overhead
    return max(free) if free else 0.0


def static_waves_makespan(costs, ctas, overhead):
    load, k = [0.0] * ctas, 0
    while k * ctas < len(costs):
        for c in range(ctas):
            t = k * ctas + (c + k) % ctas
            if t < len(costs):
                load[c] += costs[t] + overhead
        k += 1
    return max(load)


def check_order(mod, m_blocks, pairs, group):
    name = f"M {m_blocks} pairs {pairs} group {group}"
    got = [tuple(int(x) for x in t) for t in mod.grouped_order(m_blocks, pairs, group)]
    equal(name, sorted(got), sorted((p, m) for p in range(pairs) for m in range(m_blocks)),
          what="every (pair, m) exactly once")
    per_group = group * m_blocks
    for i, (p, m) in enumerate(got):
        if p // group != i // per_group:
            raise Fail(name, f"tile #{i} is pair {p}: not in group {i // per_group} (groups of {group} pairs follow "
                             "one another)")
        if i % per_group and got[i - 1][1] < m:
            raise Fail(name, f"tile #{i} (pair {p}, m {m}) comes after m {got[i - 1][1]}: not longest first in its group")
        if i % per_group and got[i - 1][1] == m and got[i - 1][0] > p:
            raise Fail(name, f"tile #{i}: pairs of one level out of order")
    return got


def check(mod, rng):
    # The order.
    for m_blocks, pairs, group in [(3, 5, 2), (4, 8, 8), (4, 8, 1), (1, 3, 2), (5, 7, 3), (2, 1, 1)]:
        check_order(mod, m_blocks, pairs, group)
    equal("M 3 pairs 5 group 2", [tuple(t) for t in mod.grouped_order(3, 5, 2)][:8],
          [(0, 2), (1, 2), (0, 1), (1, 1), (0, 0), (1, 0), (2, 2), (3, 2)], what="the first eight tiles")
    equal("M 4 pairs 2 group 1", [tuple(t) for t in mod.grouped_order(4, 2, 1)],
          [(0, 3), (0, 2), (0, 1), (0, 0), (1, 3), (1, 2), (1, 1), (1, 0)], what="group 1: the static order")
    m, p = int(rng.integers(1, 9)), int(rng.integers(1, 40))
    check_order(mod, m, p, int(rng.integers(1, p + 1)))

    # The makespan of the counter.
    for costs, ctas, over in [([3, 1, 2], 2, 0.0), ([1, 1, 1, 1], 3, 0.5), ([], 4, 1.0), ([5, 4, 3, 2, 1], 2, 0.25)]:
        close(f"costs {costs} on {ctas} CTAs, overhead {over}", float(mod.dynamic_makespan(costs, ctas, over)),
              reference_makespan(costs, ctas, over), what="makespan")
    costs = [int(c) for c in rng.integers(1, 20, size=int(rng.integers(5, 60)))]
    close("random costs on 7 CTAs", float(mod.dynamic_makespan(costs, 7, 0.5)), reference_makespan(costs, 7, 0.5),
          what="makespan")

    # Why: causal tiles, 64 pairs x 8 query blocks on 24 CTAs (132 SMs in the real kernel). The
    # counter in the grouped longest-first order ends within one tile of the average, and sooner
    # than static waves over the static order.
    m_blocks, pairs, ctas, over = 8, 64, 24, 0.5
    order = mod.grouped_order(m_blocks, pairs, 16)
    dyn = float(mod.dynamic_makespan([m + 1 for _, m in order], ctas, over))
    static = static_waves_makespan([m_blocks - t % m_blocks for t in range(m_blocks * pairs)], ctas, over)
    average = pairs * sum(range(1, m_blocks + 1)) / ctas + m_blocks * pairs / ctas * over
    if dyn > average + 1 + over + 1e-9:
        raise Fail("64 pairs x 8 blocks, 24 CTAs", f"the counter ends at {dyn:.2f}, the average load is {average:.2f}: "
                   "the last tiles handed out are not the short ones")
    if not dyn < static:
        raise Fail("64 pairs x 8 blocks, 24 CTAs", f"the counter ({dyn:.2f}) is not ahead of static waves ({static:.2f})")
