"""Mutant: each CTA takes a contiguous chunk of tiles (balanced counts, but not one tile per wave:
the tiles running together no longer share a head's K and V)."""


def assign(num_tiles, ctas):
    per = -(-num_tiles // ctas) if ctas else 0
    return [list(range(c * per, min((c + 1) * per, num_tiles))) for c in range(ctas)]


def makespan(num_tiles, ctas, m_blocks):
    return max((sum(m_blocks - t % m_blocks for t in tiles) for tiles in assign(num_tiles, ctas)), default=0)
