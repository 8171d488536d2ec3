"""Spec of algorithm/ring_zigzag: the plan's coverage of the causal mask, pair by pair, and its balance."""

import numpy as np
from grading import Fail

CONCEPT = "ring attention: zigzag shards (chunks r and 2R-1-r), one call per step, every visible pair once, equal work"
NEEDS_GPU = False
PARTS = ("all", "first", "second")


def _rows(chunks, c, part):
    """Global token indices of a shard's part: chunks (a, b) of length c, stored a then b."""
    a, b = chunks
    first, second = list(range(a * c, (a + 1) * c)), list(range(b * c, (b + 1) * c))
    return {"all": first + second, "first": first, "second": second}[part]


def check(mod, rng):
    c = int(rng.integers(2, 4))  # chunk length
    for world in (1, 2, 3, 4, 5):
        n = 2 * world * c
        shards = []
        for r in range(world):
            ch = mod.zigzag_chunks(r, world)
            ints = len(ch) == 2 and all(isinstance(x, (int, np.integer)) for x in ch)
            if not ints or not 0 <= ch[0] < ch[1] < 2 * world:
                raise Fail("chunks", f"R {world} rank {r}: zigzag_chunks returned {ch!r}, expected two chunk "
                                     f"indices a < b in [0, {2 * world})")
            shards.append((int(ch[0]), int(ch[1])))
        if sorted(x for s in shards for x in s) != list(range(2 * world)):
            raise Fail("chunks", f"R {world}: the ranks' chunks {shards} do not cover each of the "
                                 f"{2 * world} chunks once")
        for causal in (False, True):
            covered = np.zeros((n, n), dtype=np.int64)
            work = np.zeros(world, dtype=np.int64)
            for r in range(world):
                for step in range(world):
                    plan = mod.ring_plan(step, r, world, causal)
                    if plan is None:
                        continue
                    qp, kp, is_causal = plan
                    if qp not in PARTS or kp not in PARTS:
                        raise Fail("plan", f"R {world} rank {r} step {step}: parts {qp!r}, {kp!r} "
                                           f"(expected one of {PARTS})")
                    src = (r - step) % world
                    qi, kj = _rows(shards[r], c, qp), _rows(shards[src], c, kp)
                    for li, i in enumerate(qi):
                        for lj, j in enumerate(kj):
                            if is_causal and lj > li + (len(kj) - len(qi)):  # bottom-right on the local rows
                                continue
                            covered[i, j] += 1
                            work[r] += 1
            want = np.tril(np.ones((n, n), dtype=np.int64)) if causal else np.ones((n, n), dtype=np.int64)
            name = f"R {world} ({2 * world} chunks of {c}) {'causal' if causal else 'non-causal'}"
            extra = np.argwhere((covered > 0) & (want == 0))
            if len(extra):
                i, j = (int(x) for x in extra[0])
                raise Fail("coverage", f"{name}: query {i} meets key {j}, which causal attention hides "
                                       f"({len(extra)} such pairs)")
            twice = np.argwhere(covered > 1)
            if len(twice):
                i, j = (int(x) for x in twice[0])
                raise Fail("coverage", f"{name}: pair (query {i}, key {j}) computed {int(covered[i, j])} times "
                                       "(its partials would be merged twice)")
            missing = np.argwhere((covered == 0) & (want == 1))
            if len(missing):
                i, j = (int(x) for x in missing[0])
                raise Fail("coverage", f"{name}: pair (query {i}, key {j}) never computed ({len(missing)} missing)")
            if causal and world > 1 and work.min() != work.max():
                raise Fail("balance", f"{name}: visible pairs per rank {work.tolist()}: the ranks' work differs")
