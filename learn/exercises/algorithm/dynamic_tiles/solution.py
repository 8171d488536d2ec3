"""Solution for algorithm/dynamic_tiles (the task is in stub.py)."""
import heapq


def grouped_order(m_blocks, pairs, group):
    order = []
    for first in range(0, pairs, group):
        members = range(first, min(pairs, first + group))
        for m in reversed(range(m_blocks)):
            order.extend((p, m) for p in members)
    return order


def dynamic_makespan(costs, ctas, overhead):
    free = [(0.0, c) for c in range(ctas)]  # (time free, CTA): the heap pops the earliest, then the lowest index
    for cost in costs:
        t, c = heapq.heappop(free)
        heapq.heappush(free, (t + cost + overhead, c))
    return max(t for t, _ in free)
