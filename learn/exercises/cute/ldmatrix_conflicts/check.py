"""Spec of cute/ldmatrix_conflicts: bank groups and wavefronts from pycute's flashlab layouts."""

from grading import Fail
from cute.common import cute, flashlab_smem

CONCEPT = "ldmatrix reads 8 x 16 B rows: unswizzled 128 B rows share a bank group (8-way); Swizzle<3,3,3> gives 8 groups"
NEEDS_GPU = False


def ref(row0, chunk, hdim, swizzled):
    lay = flashlab_smem(64, hdim, swizzled)
    addrs = [2 * lay(r, 8 * chunk) for r in range(row0, row0 + 8)]
    groups = [(a // 16) % 8 for a in addrs]
    per = {}
    for a, g in zip(addrs, groups):
        per.setdefault(g, set()).add(a // 16)
    return groups, max(len(s) for s in per.values())


def check(mod, rng):
    cute()
    cases = [(0, 0, 64, False), (0, 0, 64, True), (8, 3, 64, True), (0, 1, 32, False), (0, 1, 32, True),
             (16, 9, 128, False), (16, 9, 128, True)]
    for _ in range(20):
        hdim = [32, 64, 96, 128][int(rng.integers(4))]
        cases.append((8 * int(rng.integers(8)), int(rng.integers(hdim // 8)), hdim, bool(rng.integers(2))))
    for row0, chunk, hdim, sw in cases:
        name = f"rows {row0}..{row0 + 7}, chunk {chunk}, hdim {hdim}, {'swizzled' if sw else 'plain'}"
        groups, waves = ref(row0, chunk, hdim, sw)
        got = [int(g) for g in mod.bank_groups(row0, chunk, hdim, sw)]
        if got != groups:
            raise Fail(name, f"bank groups {got}, expected {groups}")
        if mod.wavefronts(row0, chunk, hdim, sw) != waves:
            raise Fail(name, f"wavefronts {mod.wavefronts(row0, chunk, hdim, sw)}, expected {waves}")
