"""Mutant: tile i to CTA i mod G (static), not to the CTA that is free first."""


def grouped_order(m_blocks, pairs, group):
    order = []
    for first in range(0, pairs, group):
        for m in reversed(range(m_blocks)):
            order.extend((p, m) for p in range(first, min(pairs, first + group)))
    return order


def dynamic_makespan(costs, ctas, overhead):
    load = [0.0] * ctas
    for i, cost in enumerate(costs):
        load[i % ctas] += cost + overhead
    return max(load)
