"""Mutant: the per-tile overhead left out of a CTA's time."""
import heapq


def grouped_order(m_blocks, pairs, group):
    order = []
    for first in range(0, pairs, group):
        for m in reversed(range(m_blocks)):
            order.extend((p, m) for p in range(first, min(pairs, first + group)))
    return order


def dynamic_makespan(costs, ctas, overhead):
    free = [(0.0, c) for c in range(ctas)]
    for cost in costs:
        t, c = heapq.heappop(free)
        heapq.heappush(free, (t + cost, c))
    return max(t for t, _ in free)
