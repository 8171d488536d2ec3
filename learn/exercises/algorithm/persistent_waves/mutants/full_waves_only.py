"""Mutant: stops before the last, partial wave (its tiles are never computed)."""


def assign(num_tiles, ctas):
    lists = [[] for _ in range(ctas)]
    for k in range(num_tiles // ctas):
        for c in range(ctas):
            lists[c].append(k * ctas + (c + k) % ctas)
    return lists


def makespan(num_tiles, ctas, m_blocks):
    return max((sum(m_blocks - t % m_blocks for t in tiles) for tiles in assign(num_tiles, ctas)), default=0)
