"""Mutant: longest first over every pair at once (no L2 groups): balanced, but the tiles running
together read every head's K and V."""
import heapq


def grouped_order(m_blocks, pairs, group):
    return [(p, m) for m in reversed(range(m_blocks)) for p in range(pairs)]


def dynamic_makespan(costs, ctas, overhead):
    free = [(0.0, c) for c in range(ctas)]
    for cost in costs:
        t, c = heapq.heappop(free)
        heapq.heappush(free, (t + cost + overhead, c))
    return max(t for t, _ in free)
