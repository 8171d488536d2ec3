"""Solution for algorithm/persistent_waves (the task is in stub.py)."""


def assign(num_tiles, ctas):
    lists = [[] for _ in range(ctas)]
    k = 0
    while k * ctas < num_tiles:
        for c in range(ctas):
            t = k * ctas + (c + k) % ctas
            if t < num_tiles:
                lists[c].append(t)
        k += 1
    return lists


def makespan(num_tiles, ctas, m_blocks):
    return max((sum(m_blocks - t % m_blocks for t in tiles) for tiles in assign(num_tiles, ctas)), default=0)
