"""Spec of algorithm/persistent_waves: the waves' rules, the causal balance, the makespan."""

from grading import Fail, equal

CONCEPT = "persistent CTAs: tiles handed out in rotated waves, so causal tiles of unequal cost balance"
NEEDS_GPU = False


def cost(t, m_blocks):
    return m_blocks - t % m_blocks  # query block m = M - 1 - t % M visits m + 1 key blocks


def check_assignment(mod, tiles, ctas):
    name = f"T {tiles} G {ctas}"
    got = mod.assign(tiles, ctas)
    if len(got) != ctas:
        raise Fail(name, f"{len(got)} lists, expected one per CTA ({ctas})")
    seen = sorted(int(t) for lst in got for t in lst)
    equal(name, seen, list(range(tiles)), what="every tile exactly once")
    for c, lst in enumerate(got):
        for k, t in enumerate(lst):
            if not k * ctas <= int(t) < (k + 1) * ctas:
                raise Fail(name, f"CTA {c}'s tile #{k} is {t}: not in wave {k} ([{k * ctas}, {(k + 1) * ctas}))")
    return got


def check(mod, rng):
    cases = [(10, 3), (8, 8), (7, 8), (64, 8), (48, 12), (100, 7), (1, 4), (0, 3)]
    cases.append((int(rng.integers(1, 300)), int(rng.integers(1, 40))))
    for tiles, ctas in cases:
        check_assignment(mod, tiles, ctas)
    # The balance that matters: G a multiple of M, many waves (132 SMs, M = 4 at seqlen 512 in the
    # real kernel; here smaller). Balanced means within one tile's cost of the average.
    for heads, m_blocks, ctas in [(16, 4, 8), (33, 4, 132), (12, 6, 12), (40, 3, 9), (int(rng.integers(8, 30)), 4, 16)]:
        tiles = heads * m_blocks
        got = check_assignment(mod, tiles, ctas)
        loads = [sum(cost(int(t), m_blocks) for t in lst) for lst in got]
        average = sum(loads) / ctas
        name = f"{heads} heads x {m_blocks} query blocks on {ctas} CTAs (causal)"
        if max(loads) > average + m_blocks:
            raise Fail(name, f"busiest CTA costs {max(loads)} key blocks, the average {average:.1f}: "
                             "a CTA keeps getting the same query block")
        equal(name, int(mod.makespan(tiles, ctas, m_blocks)), max(loads), what="makespan")
